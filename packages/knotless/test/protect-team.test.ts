// A team's branch protection (format.md, "dev.knotless.protection"): the owner and each maintainer
// the owner's ref table lists protect a branch in their own accounts, and every reader combines
// them by one rule that only tightens: each account's required checks hold on their own, counted
// only from the owner, that account and the runners it trusts, and a push may rewrite or delete the
// branch only when every record allows it. On the dev network's two PDSes (alice and carol on one,
// bob and dave on the other), read directly (no appview).
import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  json,
  newSite,
  openPr,
  pdsOf,
  tipOf,
  useForgeNet,
  writeRaw,
  type ItemJson,
} from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

const {
  t,
  users: [alice, bob, carol, dave],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test', 'dave.test']);

const REPO = 'alice.test/site';
const URL = `knotless://${REPO}`;
let aliceDir = '';
let bobDir = '';
let pr: ItemJson;
let topic = '';

interface Shown {
  repo: string;
  branches: {
    branch: string;
    requiredChecks: string[];
    allowForcePush: boolean;
    allowDeletion: boolean;
    rules: { by: string; name: string; owner: boolean; requiredChecks: string[]; trustedRunners: string[] }[];
  }[];
}

interface ListJson {
  required?: string[];
  unmet?: { context: string; kind: string; reason: string; by: string[] }[];
}

/** The protection records in `handle`'s account, by record key, read from its PDS. */
async function protections(handle: string): Promise<Map<string, Record<string, unknown>>> {
  const res = await fetch(
    `${pdsOf(t, handle)}/xrpc/com.atproto.repo.listRecords?repo=${t.dids[handle]}&collection=dev.knotless.protection`,
  );
  assert.equal(res.status, 200);
  const body = (await res.json()) as { records: { uri: string; value: Record<string, unknown> }[] };
  return new Map(body.records.map((r) => [r.uri.split('/').pop()!, r.value]));
}

const merge = (...more: string[]) => alice.knotless('pr', 'merge', REPO, pr.id, ...more);
const check = (who: typeof bob, context: string, state: string) =>
  who.knotless('check', 'set', REPO, topic, '--context', context, '--state', state);
const unmetOn = async (branch: string) =>
  json<ListJson>(await carol.knotless('check', 'list', REPO, branch, '--json'));

describe("a team's branch protection", () => {
  it('alice has a site on a ref table and bob (on the other PDS) maintains it', async () => {
    await t.ready;
    aliceDir = await newSite(alice, 'alice.test');
    const add = await alice.knotless('repo', 'maintainer', 'add', 'site', 'bob.test');
    assert.equal(add.code, 0, add.stderr);
    bobDir = path.join(bob.dir(), 'c');
    await bob.ok(path.dirname(bobDir), 'clone', '-q', URL, 'c');
  });

  it('refuses a non-maintainer in one sentence, writing nothing', async () => {
    const denied = await carol.knotless('repo', 'protect', REPO, 'main', '--require-check', 'test');
    assert.equal(denied.code, 5, denied.stderr);
    assert.equal(denied.stderr.trim().split('\n').length, 1, denied.stderr);
    assert.match(
      denied.stderr,
      /Only alice\.test and the maintainers it lists can protect branches of site; you are carol\.test\./,
    );
    assert.equal((await protections('carol.test')).size, 0, 'a refused protect wrote');
  });

  it("alice requires test and build trusting carol; bob requires lint trusting dave, in his own account under the maintainer's key", async () => {
    const a = await alice.knotless(
      'repo',
      'protect',
      'site',
      'main',
      '--require-check',
      'test',
      '--require-check',
      'build',
      '--runner',
      'carol.test',
    );
    assert.equal(a.code, 0, a.stderr);
    // bob also has a site of his own: his protection of alice's never touches its key.
    const own = await bob.knotless('repo', 'create', 'site');
    assert.equal(own.code, 0, own.stderr);
    const b = await bob.knotless(
      'repo',
      'protect',
      REPO,
      'main',
      '--require-check',
      'lint',
      '--runner',
      'dave.test',
    );
    assert.equal(b.code, 0, b.stderr);
    assert.match(b.stderr, /main is protected by you\./);
    const bobs = await protections('bob.test');
    assert.deepEqual([...bobs.keys()], [`site~${t.dids['alice.test']}`]);
    assert.equal(
      bobs.get(`site~${t.dids['alice.test']}`)?.['repo'],
      `at://${t.dids['alice.test']}/dev.knotless.repo/site`,
    );

    const shown = json<Shown>(await carol.knotless('repo', 'protect', REPO, 'main', '--show', '--json'));
    assert.deepEqual(
      shown.branches.map((b) => [b.branch, b.requiredChecks, b.allowForcePush]),
      [['main', ['test', 'build', 'lint'], false]],
    );
    assert.deepEqual(
      shown.branches[0]!.rules.map((r) => [r.name, r.owner, r.requiredChecks, r.trustedRunners]),
      [
        ['alice.test', true, ['test', 'build'], [t.dids['carol.test']]],
        ['bob.test', false, ['lint'], [t.dids['dave.test']]],
      ],
    );
    const text = await carol.knotless('repo', 'protect', REPO, 'main', '--show');
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /set by alice\.test \(the owner\): requires test, build; counts checks by the owner, carol\.test;/,
    );
    assert.match(
      text.stdout,
      /set by bob\.test \(a maintainer\): requires lint; counts checks by the owner, bob\.test, dave\.test;/,
    );
  });

  it("a record of the same shape in a non-maintainer's account changes nothing", async () => {
    await writeRaw(
      t,
      'carol.test',
      'dev.knotless.protection',
      {
        repo: `at://${t.dids['alice.test']}/dev.knotless.repo/site`,
        branches: [{ branch: 'main', requiredChecks: ['carols'] }],
        createdAt: new Date().toISOString(),
      },
      `site~${t.dids['alice.test']}`,
    );
    const seen = await unmetOn('main');
    assert.deepEqual(seen.required, ['test', 'build', 'lint']);
  });

  it("a maintainer's requirement blocks pr merge until met; his trusted runner never satisfies the owner's", async () => {
    await alice.ok(aliceDir, 'switch', '-q', '-c', 'topic');
    topic = await commitFiles(alice, aliceDir, { 'b.txt': 'b\n' }, 'add b');
    await alice.ok(aliceDir, 'push', '-q', 'origin', 'topic');
    pr = await openPr(alice, REPO, 'site:topic', 'Add b');
    const base = await tipOf(alice, URL, 'main');

    assert.equal((await check(carol, 'test', 'success')).code, 0);
    const bobs = await merge();
    assert.equal(bobs.code, 20, bobs.stderr);
    assert.equal(bobs.stderr.trim().split('\n').length, 1, bobs.stderr);
    assert.match(bobs.stderr, /lint: no check by a trusted runner yet \(required by bob\.test\)/);

    // dave's build success counts for nothing of alice's: only bob trusts dave, and only for lint.
    assert.equal((await check(dave, 'lint', 'success')).code, 0);
    assert.equal((await check(dave, 'build', 'success')).code, 0);
    const owners = await merge();
    assert.equal(owners.code, 20, owners.stderr);
    assert.match(
      owners.stderr,
      /waits for the required checks of main on [0-9a-f]{12}: build: only checked by runners the owner does not trust \(dave\.test\); nothing was merged/,
    );
    assert.equal(await tipOf(alice, URL, 'main'), base, 'a refused merge moved main');

    assert.equal((await check(carol, 'build', 'success')).code, 0);
    const merged = await merge('--json');
    assert.equal(merged.code, 0, merged.stderr);
    assert.equal(await tipOf(alice, URL, 'main'), topic);
  });

  it("a maintainer's record cannot allow a force-push the owner's forbids", async () => {
    const allow = await bob.knotless(
      'repo',
      'protect',
      REPO,
      'main',
      '--require-check',
      'lint',
      '--runner',
      'dave.test',
      '--allow-force-push',
    );
    assert.equal(allow.code, 0, allow.stderr);
    await bob.ok(bobDir, 'fetch', '-q', 'origin');
    await bob.ok(bobDir, 'reset', '-q', '--hard', 'origin/main~1');
    await commitFiles(bob, bobDir, { 'c.txt': 'c\n' }, 'bob rewrites');
    const forced = await bob.git(bobDir, 'push', '--force', 'origin', 'main');
    assert.notEqual(forced.code, 0, forced.stderr);
    assert.match(
      forced.stderr,
      /! \[remote rejected\] main -> main \(protected branch: force-push not allowed\)/,
    );
    assert.match(forced.stderr, /nothing was written to it \(the repository's owner can allow it with/);
    assert.equal(await tipOf(alice, URL, 'main'), topic);
  });

  it("a maintainer's refusal of force-push binds the owner's push too, and the sentence names him", async () => {
    const open = await alice.knotless(
      'repo',
      'protect',
      'site',
      'main',
      '--require-check',
      'test',
      '--runner',
      'carol.test',
      '--allow-force-push',
    );
    assert.equal(open.code, 0, open.stderr);
    const shut = await bob.knotless('repo', 'protect', REPO, 'main', '--require-check', 'lint');
    assert.equal(shut.code, 0, shut.stderr);
    await alice.ok(aliceDir, 'switch', '-q', 'main');
    await alice.ok(aliceDir, 'reset', '-q', '--hard', topic);
    await alice.ok(aliceDir, 'reset', '-q', '--hard', 'HEAD~1');
    const rewrite = await commitFiles(alice, aliceDir, { 'd.txt': 'd\n' }, 'alice rewrites');
    const forced = await alice.git(aliceDir, 'push', '--force', 'origin', 'main');
    assert.notEqual(forced.code, 0, forced.stderr);
    assert.match(
      forced.stderr,
      /! \[remote rejected\] main -> main \(protected branch: force-push not allowed\)/,
    );
    assert.match(forced.stderr, /nothing was written to it \(bob\.test \(a maintainer\) can allow it with/);
    assert.equal(await tipOf(alice, URL, 'main'), topic);
    assert.deepEqual((await unmetOn('main')).required, ['test', 'lint']);

    // Removed, bob's record counts for nothing for every reader: his lint is no longer required,
    // and his refusal no longer binds (carol's record, refusing everything, never did).
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'site', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    assert.deepEqual((await unmetOn('main')).required, ['test']);
    const shown = json<Shown>(await dave.knotless('repo', 'protect', REPO, '--show', '--json'));
    assert.deepEqual(
      shown.branches[0]!.rules.map((r) => r.name),
      ['alice.test'],
    );
    await alice.ok(aliceDir, 'push', '-q', '--force', 'origin', 'main');
    assert.equal(await tipOf(alice, URL, 'main'), rewrite);
  });

  it('a removed maintainer is refused as anyone else is, writing nothing', async () => {
    const before = await protections('bob.test');
    const denied = await bob.knotless('repo', 'protect', REPO, 'main', '--remove');
    assert.equal(denied.code, 5, denied.stderr);
    assert.deepEqual(await protections('bob.test'), before);
  });
});
