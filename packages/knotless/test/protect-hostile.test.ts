// A hostile or absent maintainer cannot break branch protection (format.md,
// `dev.knotless.protection`), read directly from the PDSes (no appview). alice owns site and bob
// (on the other PDS, reached through a proxy his DID document names) maintains it. A record bob
// writes raw under his key that breaks the rules, or names another repository, is skipped with one
// warning by every reader (repo protect --show, check list, pr merge, the helper's push) and none of
// its text reaches the terminal. With bob's PDS unreachable, each command that needs his records
// refuses in one sentence naming him, until alice removes him, which works and unblocks everything.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setPdsEndpoint, startProxy, type Proxy } from 'knotless-devnet';
import { json, newSite, openPr, tipOf, type ItemJson } from './helpers/forge.ts';
import { commitFiles, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// Two PDSes: alice and carol on the first, bob on the second.
const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
/** Variables for every command, beside the file's own: set while bob's PDS is down. */
let extra: Record<string, string> = {};
const env = () => ({ KNOTLESS_COMPACT: '0', ...extra });
const alice = useGitUser(t, 'alice.test', env);
const carol = useGitUser(t, 'carol.test', env);
/** bob's PDS as his DID document names it: a proxy in front of the second PDS, which can go down. */
let bobsPds: Proxy | undefined;
const bob = useGitUser(t, 'bob.test', env, async (user) => {
  bobsPds = await startProxy({ target: t.pdsOf['bob.test']! });
  await setPdsEndpoint(t.net, t.dids['bob.test']!, bobsPds.url, 1);
  const res = await user.knotless('login', 'bob.test', '--app-password', t.password);
  assert.equal(res.code, 0, res.stderr);
});

after(async () => {
  await bobsPds?.close();
});

const REPO = 'alice.test/site';
const URL = `knotless://${REPO}`;
/** What every hostile record carries, so that any of its text reaching a terminal is caught. */
const MARK = 'HOSTILEMARK';
let aliceDir = '';
let pr: ItemJson;
let topic = '';

interface Shown {
  branches: { branch: string; requiredChecks: string[]; rules: { name: string }[] }[];
}

/** Writes `record` in bob's account under his key of site with putRecord, bypassing the CLI. */
async function putRaw(record: Record<string, unknown>): Promise<void> {
  const pds = t.pdsOf['bob.test']!;
  const session = (await (
    await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: 'bob.test', password: t.password }),
    })
  ).json()) as { accessJwt: string; did: string };
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.putRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({
      repo: session.did,
      collection: 'dev.knotless.protection',
      rkey: `site~${t.dids['alice.test']!}`,
      validate: false,
      record: { $type: 'dev.knotless.protection', ...record },
    }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** stderr's lines that warn about a protection record of bob's. */
const warnings = (stderr: string) =>
  stderr.split('\n').filter((l) => l.includes('dev.knotless.protection') || l.includes(MARK));

/** Asserts nothing of the hostile record (its marker, an escape or bell) reached the output. */
function clean(what: string, ...outputs: string[]): void {
  for (const o of outputs) {
    assert.ok(
      !o.toLowerCase().includes(MARK.toLowerCase()),
      `${what}: the record's text reached the terminal:\n${o}`,
    );
    assert.ok(
      !o.includes('\u001b') && !o.includes('\u0007'),
      `${what}: a control character reached the terminal`,
    );
    assert.doesNotMatch(o, /\n\s+at /, `${what}: a stack`);
  }
}

const merge = (...more: string[]) => alice.knotless('pr', 'merge', REPO, pr.id, ...more);

describe('a hostile or absent maintainer cannot break branch protection', () => {
  it('alice has a site protected by her and maintained by bob, and a pull request into main', async () => {
    await t.ready;
    aliceDir = await newSite(alice, 'alice.test');
    const add = await alice.knotless('repo', 'maintainer', 'add', 'site', 'bob.test');
    assert.equal(add.code, 0, add.stderr);
    const mine = await alice.knotless('repo', 'protect', 'site', 'main', '--require-check', 'test');
    assert.equal(mine.code, 0, mine.stderr);
    await alice.ok(aliceDir, 'switch', '-q', '-c', 'topic');
    topic = await commitFiles(alice, aliceDir, { 'b.txt': 'b\n' }, 'add b');
    await alice.ok(aliceDir, 'push', '-q', 'origin', 'topic');
    pr = await openPr(alice, REPO, 'site:topic', 'Add b');
  });

  it("a maintainer's malformed or misdirected record is skipped with one warning by every reader, none of it shown", async () => {
    const uri = `at://${t.dids['alice.test']!}/dev.knotless.repo/site`;
    const at = new Date().toISOString();
    const hostile: [string, Record<string, unknown>][] = [
      ['wrong types', { repo: 42, branches: { branch: MARK }, createdAt: MARK }],
      [
        'a huge branch list',
        {
          repo: uri,
          branches: Array.from({ length: 2000 }, (_, i) => ({
            branch: `${MARK}-${i}`,
            requiredChecks: [MARK],
          })),
          createdAt: at,
        },
      ],
      [
        'a branch name with control characters',
        {
          repo: uri,
          branches: [{ branch: `main\u001b[31m${MARK}\u0007`, requiredChecks: [MARK] }],
          createdAt: at,
        },
      ],
      [
        'a branch name 10 KB long',
        {
          repo: uri,
          branches: [{ branch: `${MARK}${'x'.repeat(10_240)}`, requiredChecks: [MARK] }],
          createdAt: at,
        },
      ],
      [
        'a required check with control characters',
        {
          repo: uri,
          branches: [{ branch: 'main', requiredChecks: [`\u001b]0;${MARK}\u0007`] }],
          createdAt: at,
        },
      ],
      [
        'another repository named',
        {
          repo: `at://${t.dids['alice.test']!}/dev.knotless.repo/${MARK.toLowerCase()}`,
          branches: [{ branch: 'main', requiredChecks: [MARK] }],
          createdAt: at,
        },
      ],
    ];
    for (const [what, record] of hostile) {
      await putRaw(record);
      const shown = await carol.knotless('repo', 'protect', REPO, '--show', '--json');
      const s = json<Shown>(shown);
      assert.deepEqual(
        s.branches.map((b) => [b.branch, b.requiredChecks, b.rules.map((r) => r.name)]),
        [['main', ['test'], ['alice.test']]],
        what,
      );
      assert.equal(warnings(shown.stderr).length, 1, `${what}:\n${shown.stderr}`);
      const text = await carol.knotless('repo', 'protect', REPO, 'main', '--show');
      assert.equal(text.code, 0, text.stderr);
      assert.match(
        text.stdout,
        /^alice\.test\/site main\n {2}required checks: test\n {2}trusted runners: the owner\n/,
      );
      assert.doesNotMatch(text.stdout, /set by|a maintainer/);
      assert.equal(warnings(text.stderr).length, 1, `${what}:\n${text.stderr}`);
      const listed = await carol.knotless('check', 'list', REPO, 'main', '--json');
      assert.deepEqual(json<{ required?: string[] }>(listed).required, ['test'], what);
      assert.equal(warnings(listed.stderr).length, 1, `${what}:\n${listed.stderr}`);
      const refused = await merge();
      assert.equal(refused.code, 20, refused.stderr);
      assert.match(refused.stderr, /: test: no check by a trusted runner yet; nothing was merged/);
      assert.equal(warnings(refused.stderr).length, 1, `${what}:\n${refused.stderr}`);
      clean(
        what,
        shown.stdout,
        shown.stderr,
        text.stdout,
        text.stderr,
        listed.stdout,
        listed.stderr,
        refused.stderr,
      );
    }
    // The helper's push refusal: a force-push to main is refused by alice's record alone, with one warning.
    await alice.ok(aliceDir, 'switch', '-q', 'main');
    await alice.ok(aliceDir, 'commit', '-q', '--amend', '-m', 'rewritten');
    const before = await tipOf(alice, URL, 'main');
    const forced = await alice.git(aliceDir, 'push', '--force', 'origin', 'main');
    assert.notEqual(forced.code, 0, forced.stderr);
    assert.match(forced.stderr, /main -> main \(protected branch: force-push not allowed\)/);
    assert.match(forced.stderr, /nothing was written to it \(the repository's owner can allow it with/);
    assert.equal(warnings(forced.stderr).length, 1, forced.stderr);
    clean('the force-push', forced.stdout, forced.stderr);
    assert.equal(await tipOf(alice, URL, 'main'), before);
    await alice.ok(aliceDir, 'reset', '-q', '--hard', 'origin/main');
  });

  it("with bob's PDS unreachable, each command needing his records refuses in one sentence naming him; removing him unblocks", async () => {
    const his = await bob.knotless('repo', 'protect', REPO, 'main', '--require-check', 'lint');
    assert.equal(his.code, 0, his.stderr);
    const ok = await alice.knotless('check', 'set', REPO, topic, '--context', 'test', '--state', 'success');
    assert.equal(ok.code, 0, ok.stderr);
    const start = { main: await tipOf(alice, URL, 'main'), topic: await tipOf(alice, URL, 'topic') };
    bobsPds!.inject({ fault: { kind: 'drop' }, times: Infinity });
    extra = { KNOTLESS_RETRIES: '0' };
    const bobDid = t.dids['bob.test']!;
    const protection = new RegExp(
      `^knotless: The branch protection that maintainer ${bobDid} keeps for at://${t.dids['alice.test']!}/dev\\.knotless\\.repo/site could not be read \\(.*\\); a maintainer's requirements are never left out, so try again later, or the owner can remove the maintainer\\.$`,
    );
    for (const args of [
      ['pr', 'merge', REPO, pr.id],
      ['check', 'list', REPO, 'main'],
      ['repo', 'protect', REPO, '--show'],
    ]) {
      const res = await alice.knotless(...args);
      assert.notEqual(res.code, 0, `${args.join(' ')}: ${res.stderr}`);
      // One sentence; besides it only warnings (pr merge also leaves bob's decisions on the pull
      // request out, saying so).
      const lines = res.stderr.trim().split('\n');
      const said = lines.filter((l) => !l.startsWith('knotless: warning: '));
      assert.equal(said.length, 1, `${args.join(' ')}: ${res.stderr}`);
      assert.match(said[0]!, protection, args.join(' '));
      clean(args.join(' '), res.stdout, res.stderr);
    }
    // A push is refused whatever branch it updates: one that rewrites a branch (protected or not:
    // bob may protect any branch) needs his protection, the helper's first read, and names him in
    // that sentence; a fast-forward needs none, and is refused by the rule of every push to a team
    // (it is confirmed against every maintainer's refs: "Teams"), which names him too.
    await alice.ok(aliceDir, 'switch', '-q', 'topic');
    await commitFiles(alice, aliceDir, { 'c.txt': 'c\n' }, 'add c');
    const teamRule = new RegExp(
      `^knotless: The refs of ${bobDid} \\(.*\\) could not be read, and a push to alice\\.test/site is confirmed only against every maintainer's; nothing was pushed, try again when they can be read\\.$`,
    );
    const pushes = [
      [teamRule, /-> topic \(a maintainer's refs could not be read\)/, ['push', 'origin', 'topic']],
      [protection, /-> topic \(pds unreachable\)/, ['push', '--force', 'origin', 'HEAD~2:refs/heads/topic']],
      [teamRule, /-> main \(a maintainer's refs could not be read\)/, ['push', 'origin', 'topic:main']],
    ] as const;
    for (const [sentence, status, args] of pushes) {
      const res = await alice.git(aliceDir, ...args);
      assert.notEqual(res.code, 0, res.stderr);
      const said = res.stderr
        .split('\n')
        .filter((l) => l.startsWith('knotless: ') && !l.startsWith('knotless: warning: '));
      assert.equal(said.length, 1, res.stderr);
      assert.match(said[0]!, sentence, args.join(' '));
      assert.match(res.stderr, status, args.join(' '));
      clean(args.join(' '), res.stdout, res.stderr);
    }
    assert.deepEqual(
      { main: await tipOf(alice, URL, 'main'), topic: await tipOf(alice, URL, 'topic') },
      start,
    );

    // The owner's remedy works while bob's PDS is still down, and unblocks every command.
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'site', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    clean('maintainer remove', removed.stdout, removed.stderr);
    const shown = json<Shown>(await alice.knotless('repo', 'protect', REPO, '--show', '--json'));
    assert.deepEqual(
      shown.branches.map((b) => [b.branch, b.requiredChecks, b.rules.map((r) => r.name)]),
      [['main', ['test'], ['alice.test']]],
    );
    assert.deepEqual(
      json<{ required?: string[] }>(await alice.knotless('check', 'list', REPO, 'main', '--json')).required,
      ['test'],
    );
    await alice.ok(aliceDir, 'push', '-q', 'origin', 'topic');
    const merged = await merge();
    assert.equal(merged.code, 0, merged.stderr);
    assert.equal(await tipOf(alice, URL, 'main'), topic);
    extra = {};
    bobsPds!.clearFaults();
  });
});
