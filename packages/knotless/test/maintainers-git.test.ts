// Two maintainers of one repository on the network's two PDSes (bob on the second, carol on the
// first; the owner, alice, on the first) and what git's words mean across them (format.md, "Teams"):
// a racer killed between its write and its withdrawal leaves a divergence every reader resolves the
// same way and shows, until a push containing both values ends it; --force, a delete, a lease, an
// atomic push and tags as git means them; and a maintainer's PDS down, during a push and during a
// read. A push is held between its listing and its write by a pre-push hook (git runs it after the
// helper listed the refs), so that another maintainer's push lands in between, every time.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import type { Run } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
/** Per user, more environment for the commands run now. */
const extra: Record<string, Record<string, string>> = { alice: {}, bob: {}, carol: {} };
// Repositories start on ref records (KNOTLESS_REF_TABLE=0): the tables here are written by hand from
// them, as a migration would.
const env = (who: string) => () => ({ KNOTLESS_REF_TABLE: '0', KNOTLESS_COMPACT: '0', ...extra[who] });
const alice = useGitUser(t, 'alice.test', env('alice'));
const bob = useGitUser(t, 'bob.test', env('bob'));
const carol = useGitUser(t, 'carol.test', env('carol'));
const hands = {
  alice: tableHands(t, 'alice.test'),
  bob: tableHands(t, 'bob.test'),
  carol: tableHands(t, 'carol.test'),
};

before(async () => {
  await t.ready;
  assert.notEqual(t.pdsOf['bob.test'], t.pdsOf['carol.test'], 'the maintainers are on two PDSes');
});

async function ls(user: GitUser, url: string): Promise<{ refs: Map<string, string>; stderr: string }> {
  const res = await user.git(user.dir(), 'ls-remote', url);
  assert.equal(res.code, 0, res.stderr);
  return { refs: lsRemote(res.stdout), stderr: res.stderr };
}

/** Every reader, on its own machine, lists the same refs; the listing. */
async function agreed(url: string): Promise<Map<string, string>> {
  const [a, b, c] = await Promise.all([ls(alice, url), ls(bob, url), ls(carol, url)]);
  assert.deepEqual(b.refs, a.refs, 'bob lists what alice lists');
  assert.deepEqual(c.refs, a.refs, 'carol lists what alice lists');
  return a.refs;
}

interface Team {
  name: string;
  url: string;
  first: string;
  /** Work trees: alice's, bob's and carol's clones. */
  wa: string;
  wb: string;
  wc: string;
}

/** Alice's repository `name` on a ref table, main at a first commit, bob and carol its maintainers, cloned by all. */
async function team(name: string): Promise<Team> {
  assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const seed = await newRepo(alice, url);
  const first = await commitFiles(alice, seed, { 'f.txt': 'seed\n' }, 'seed');
  await alice.ok(seed, 'push', '-q', 'origin', 'main');
  const packs = (await hands.alice.refRecords(name)).get('refs/heads/main')!.packs;
  await hands.alice.writeTable(name, [{ ref: 'refs/heads/main', target: first, packs }]);
  for (const m of ['bob.test', 'carol.test']) {
    const added = await alice.knotless('repo', 'maintainer', 'add', name, m);
    assert.equal(added.code, 0, added.stderr);
  }
  const w = async (user: GitUser): Promise<string> => {
    const dir = user.dir();
    await user.ok(dir, 'clone', '-q', url, 'w');
    return `${dir}/w`;
  };
  return { name, url, first, wa: await w(alice), wb: await w(bob), wc: await w(carol) };
}

/** `handle`'s own table of alice's `name`, as stored, with its CID (undefined: none). */
function memberTable(handle: 'bob' | 'carol', name: string) {
  return hands[handle].readTable(`${name}~${t.dids['alice.test']!}`);
}

/**
 * Runs `push` (a git push from `work`) held after its listing: `between` runs once the helper has
 * listed the refs and git has decided the update, then the push goes on. The push's result.
 */
async function heldPush(work: string, push: () => Promise<Run>, between: () => Promise<void>): Promise<Run> {
  const gate = fs.mkdtempSync(path.join(t.tmpdir(), 'gate-'));
  const hook = path.join(work, '.git', 'hooks', 'pre-push');
  fs.writeFileSync(
    hook,
    `#!/bin/sh\ntouch '${gate}/listed'\nwhile [ ! -e '${gate}/go' ]; do sleep 0.05; done\n`,
    { mode: 0o755 },
  );
  try {
    const running = push();
    let done = false;
    void running.then(() => (done = true));
    // The hook runs once git has the helper's listing; a push that ends before it never got there.
    while (!fs.existsSync(`${gate}/listed`)) {
      if (done) assert.fail(`the push ended before its pre-push hook: ${(await running).stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await between();
    fs.writeFileSync(`${gate}/go`, '');
    return await running;
  } finally {
    fs.rmSync(hook);
  }
}

describe('a racer killed before it withdraws', () => {
  it('leaves a divergence every reader resolves and shows alike, ended by the next push containing both', async () => {
    const r = await team('diverge');
    const bobs = await commitFiles(bob, r.wb, { 'b.txt': 'bob\n' }, 'bob');
    const carols = await commitFiles(carol, r.wc, { 'c.txt': 'carol\n' }, 'carol');
    // Carol listed main at the first commit; bob's push lands before her write; she is refused after
    // it, and killed before she can withdraw.
    extra['carol'] = { KNOTLESS_CRASH_AT: 'push:before-withdraw' };
    let bobPush: Run | undefined;
    const killed = await heldPush(
      r.wc,
      () => carol.git(r.wc, 'push', 'origin', 'main'),
      async () => {
        bobPush = await bob.git(r.wb, 'push', 'origin', 'main');
      },
    );
    extra['carol'] = {};
    assert.equal(bobPush!.code, 0, bobPush!.stderr);
    assert.notEqual(killed.code, 0, killed.stderr);
    // Carol's entry stands in her table, not withdrawn.
    const hers = (await memberTable('carol', r.name))!.value.refs.find((e) => e.ref === 'refs/heads/main');
    assert.equal(hers?.target, carols);

    // The writer whose DID sorts first holds the repository's value; the other's is listed apart.
    const [ownerOfMain, other] =
      Buffer.compare(Buffer.from(t.dids['bob.test']!), Buffer.from(t.dids['carol.test']!)) < 0
        ? [
            { handle: 'bob.test', oid: bobs },
            { handle: 'carol.test', oid: carols },
          ]
        : [
            { handle: 'carol.test', oid: carols },
            { handle: 'bob.test', oid: bobs },
          ];
    const listed = await agreed(r.url);
    assert.equal(listed.get('refs/heads/main'), ownerOfMain.oid);
    assert.equal(listed.get(`refs/maintainers/${other.handle}/heads/main`), other.oid);
    assert.deepEqual(
      [...listed.keys()].filter((k) => k.startsWith('refs/maintainers/')),
      [`refs/maintainers/${other.handle}/heads/main`],
      "the owner's first commit, which both replaced, is not listed again",
    );

    // repo info names both values and who wrote them, in JSON and in text.
    const json = await alice.knotless('repo', 'info', `alice.test/${r.name}`, '--json');
    assert.equal(json.code, 0, json.stderr);
    const info = JSON.parse(json.stdout) as {
      refs: number;
      diverged: { ref: string; values: { target: string; by: string; did: string; listedAs?: string }[] }[];
    };
    assert.equal(info.refs, 1);
    assert.deepEqual(info.diverged, [
      {
        ref: 'refs/heads/main',
        values: [
          { target: ownerOfMain.oid, by: ownerOfMain.handle, did: t.dids[ownerOfMain.handle] },
          {
            target: other.oid,
            by: other.handle,
            did: t.dids[other.handle],
            listedAs: `refs/maintainers/${other.handle}/heads/main`,
          },
        ],
      },
    ]);
    for (const reader of [bob, carol]) {
      const again = await reader.knotless('repo', 'info', `alice.test/${r.name}`, '--json');
      assert.deepEqual(JSON.parse(again.stdout), info, 'every machine computes the same');
    }
    const text = await carol.knotless('repo', 'info', `alice.test/${r.name}`);
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      new RegExp(
        `  diverged     refs/heads/main\\n {15}${ownerOfMain.oid} by ${ownerOfMain.handle.replace('.', '\\.')}, the repository's value\\n {15}${other.oid} by ${other.handle.replace('.', '\\.')}, listed as refs/maintainers/${other.handle.replace('.', '\\.')}/heads/main\\n`,
      ),
    );

    // A commit made without a clone holds the repository's value alone, so it cannot end the
    // divergence: refused in one sentence naming the values, not tried again, nothing written. Alice's
    // machine still has its view of the repository's ref records from before the table (written here
    // by hand): the commit is not written into her table on that view, and the record it wrote before
    // it found the table is put back (the warning about the records this file's set-up left names
    // main at the first commit).
    const file = path.join(alice.dir(), 'n.txt');
    fs.writeFileSync(file, 'n\n');
    const oneSide = await alice.knotless(
      'repo',
      'commit',
      r.name,
      '-m',
      'one side',
      '--add',
      `n.txt=${file}`,
    );
    assert.equal(oneSide.code, 13, oneSide.stderr);
    const lines = oneSide.stderr.split('\n');
    assert.match(
      lines[0]!,
      new RegExp(`ignored \\(HEAD at refs/heads/main, refs/heads/main at ${r.first.slice(0, 12)}\\)`),
    );
    assert.equal(
      lines.slice(1).join('\n'),
      `knotless: main of alice.test/${r.name} has diverged (${ownerOfMain.handle}'s ${ownerOfMain.oid.slice(0, 12)}, ${other.handle}'s ${other.oid.slice(0, 12)}, none containing the others); nothing was written: push a merge of them to it (\`knotless repo info\` says where each is listed), then try again.\n`,
    );
    assert.deepEqual(await agreed(r.url), listed, 'nothing moved');
    assert.equal(
      (await hands.alice.refRecords(r.name)).get('refs/heads/main')?.target,
      r.first,
      'the ref record written before the table was found is put back',
    );

    // A pull request's merge is made on the repository's value alone too: refused the same way, exit
    // 13, nothing written, the pull request left open.
    assert.equal((await carol.knotless('repo', 'fork', `alice.test/${r.name}`)).code, 0);
    const fork = carol.dir();
    await carol.ok(fork, 'clone', '-q', `knotless://carol.test/${r.name}`, 'f');
    await carol.ok(`${fork}/f`, 'switch', '-q', '-c', 'fix', r.first);
    await commitFiles(carol, `${fork}/f`, { 'fix.txt': 'fix\n' }, 'a fix');
    await carol.ok(`${fork}/f`, 'push', '-q', 'origin', 'fix');
    const opened = await carol.knotless(
      'pr',
      'create',
      `alice.test/${r.name}`,
      '--head',
      `${r.name}:fix`,
      '--title',
      'fix',
      '--json',
    );
    assert.equal(opened.code, 0, opened.stderr);
    const pr = (JSON.parse(opened.stdout) as { id: string }).id;
    const merge = await alice.knotless('pr', 'merge', `alice.test/${r.name}`, pr);
    assert.equal(merge.code, 13, merge.stderr);
    assert.match(
      merge.stderr,
      new RegExp(
        `^knotless: main of alice\\.test/${r.name} has diverged \\(${ownerOfMain.handle.replace('.', '\\.')}'s ${ownerOfMain.oid.slice(0, 12)}, ${other.handle.replace('.', '\\.')}'s ${other.oid.slice(0, 12)}, none containing the others\\); nothing was written`,
        'm',
      ),
    );
    assert.deepEqual(await agreed(r.url), listed, 'nothing moved');
    const still = await alice.knotless('pr', 'view', `alice.test/${r.name}`, pr, '--json');
    assert.equal((JSON.parse(still.stdout) as { state: string }).state, 'open', still.stdout);

    // Bob takes carol's value from the listing, merges it, and pushes: the divergence ends.
    await bob.ok(
      r.wb,
      'fetch',
      '-q',
      'origin',
      '+refs/heads/*:refs/remotes/origin/*',
      '+refs/maintainers/*:refs/remotes/maintainers/*',
    );
    await bob.ok(r.wb, 'merge', '-q', '--no-edit', carols);
    const merged = (await bob.ok(r.wb, 'rev-parse', 'HEAD')).trim();
    const ends = await bob.git(r.wb, 'push', 'origin', 'main');
    assert.equal(ends.code, 0, ends.stderr);
    const after = await agreed(r.url);
    assert.equal(after.get('refs/heads/main'), merged);
    assert.deepEqual(
      [...after.keys()].filter((k) => k.startsWith('refs/maintainers/')),
      [],
    );
    const last = JSON.parse(
      (await alice.knotless('repo', 'info', `alice.test/${r.name}`, '--json')).stdout,
    ) as {
      diverged: unknown[];
    };
    assert.deepEqual(last.diverged, []);
  });
});

describe("git's meanings across maintainers", () => {
  it("--force replaces the other maintainer's value, and only force does", async () => {
    const r = await team('forced');
    const bobs = await commitFiles(bob, r.wb, { 'b.txt': 'bob\n' }, 'bob');
    await bob.ok(r.wb, 'push', '-q', 'origin', 'main');
    // Carol, on her own line, is refused without force (git's own check: she fetched bob's value).
    const carols = await commitFiles(carol, r.wc, { 'c.txt': 'carol\n' }, 'carol');
    await carol.ok(r.wc, 'fetch', '-q', 'origin');
    const plain = await carol.git(r.wc, 'push', 'origin', 'main');
    assert.notEqual(plain.code, 0);
    assert.match(plain.stderr, /! \[rejected\] +main -> main \(non-fast-forward\)/);
    assert.equal((await agreed(r.url)).get('refs/heads/main'), bobs);
    // Forced, it replaces bob's value for every reader, and bob's commit is in no listed ref.
    const forced = await carol.git(r.wc, 'push', '--force', 'origin', 'main');
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stderr, /\+ \w+\.\.\.\w+ +main -> main \(forced update\)/);
    const listed = await agreed(r.url);
    assert.equal(listed.get('refs/heads/main'), carols);
    assert.deepEqual(
      [...listed.keys()].filter((k) => k.startsWith('refs/maintainers/')),
      [],
    );
    // A mirror of everything listed reaches no commit of bob's (its packs may hold more objects).
    const d = alice.dir();
    await alice.ok(d, 'clone', '-q', '--mirror', r.url, 'm');
    const reachable = (await alice.ok(`${d}/m`, 'rev-list', '--all')).split('\n');
    assert.ok(reachable.includes(carols) && reachable.includes(r.first), reachable.join(' '));
    assert.equal(reachable.includes(bobs), false, "bob's replaced commit is unreachable from the listing");
  });

  it('deletes a branch another maintainer last wrote, for every reader', async () => {
    const r = await team('deleted');
    const bobs = await commitFiles(bob, r.wb, { 'b.txt': 'topic\n' }, 'topic');
    await bob.ok(r.wb, 'push', '-q', 'origin', 'HEAD:refs/heads/topic');
    assert.equal((await agreed(r.url)).get('refs/heads/topic'), bobs);
    const del = await carol.git(r.wc, 'push', 'origin', ':refs/heads/topic');
    assert.equal(del.code, 0, del.stderr);
    assert.match(del.stderr, /- \[deleted\] +topic/);
    const listed = await agreed(r.url);
    assert.equal(listed.has('refs/heads/topic'), false);
    assert.equal(listed.get('refs/heads/main'), r.first);
    assert.deepEqual(
      [...listed.keys()].filter((k) => k.startsWith('refs/maintainers/')),
      [],
    );
    // Carol's table holds the deletion, naming the value it replaced.
    const tomb = (await memberTable('carol', r.name))!.value.refs.find(
      (e) => e.ref === 'refs/heads/topic',
    ) as { target?: string; over?: { did: string; target?: string }[] } | undefined;
    assert.equal(tomb?.target, undefined);
    assert.deepEqual(
      tomb?.over?.find((o) => o.did === t.dids['bob.test']),
      { did: t.dids['bob.test'], target: bobs },
    );
  });

  it("judges --force-with-lease against the repository's value, not the pusher's own table", async () => {
    const r = await team('leased');
    // Carol's own table holds main at her commit; then bob's push, built on it, is the repository's value.
    const carols = await commitFiles(carol, r.wc, { 'c.txt': 'carol\n' }, 'carol');
    await carol.ok(r.wc, 'push', '-q', 'origin', 'main');
    await bob.ok(r.wb, 'pull', '-q', '--ff-only', 'origin', 'main');
    const bobs = await commitFiles(bob, r.wb, { 'b.txt': 'bob\n' }, 'bob');
    await bob.ok(r.wb, 'push', '-q', 'origin', 'main');
    assert.equal((await memberTable('carol', r.name))!.value.refs[0]!.target, carols);
    const rewrite = (
      await carol.ok(r.wc, 'commit-tree', '-p', r.first, '-m', 'rewrite', `${carols}^{tree}`)
    ).trim();
    // A lease on her own table's value is stale: the repository holds bob's.
    const stale = await carol.git(
      r.wc,
      'push',
      `--force-with-lease=main:${carols}`,
      'origin',
      `${rewrite}:main`,
    );
    assert.notEqual(stale.code, 0);
    assert.match(stale.stderr, /! \[rejected\] +\w+ -> main \(stale info\)/);
    assert.equal((await agreed(r.url)).get('refs/heads/main'), bobs);
    assert.equal((await memberTable('carol', r.name))!.value.refs[0]!.target, carols, 'nothing written');
    // A lease on the repository's value holds, and replaces bob's.
    const held = await carol.git(
      r.wc,
      'push',
      `--force-with-lease=main:${bobs}`,
      'origin',
      `${rewrite}:main`,
    );
    assert.equal(held.code, 0, held.stderr);
    assert.equal((await agreed(r.url)).get('refs/heads/main'), rewrite);
  });

  it("--atomic with one ref refused lands neither, and leaves the other writer's table as it was", async () => {
    const r = await team('atomic');
    // Both branches exist, at the first commit, in bob's table.
    await bob.ok(r.wb, 'push', '-q', 'origin', 'main:refs/heads/side');
    const bobsBefore = (await memberTable('bob', r.name))!;
    const mainNext = await commitFiles(carol, r.wc, { 'm.txt': 'main\n' }, 'main next');
    await carol.ok(r.wc, 'branch', '-q', 'side', r.first);
    await carol.ok(r.wc, 'checkout', '-q', 'side');
    const sideNext = await commitFiles(carol, r.wc, { 's.txt': 'side\n' }, 'side next');
    await carol.ok(r.wc, 'checkout', '-q', 'main');
    // Bob moves side on after carol listed it: her side is then behind, found only after her write.
    const bobSide = await commitFiles(bob, r.wb, { 'x.txt': 'bob side\n' }, 'bob side');
    const carolsBefore = await memberTable('carol', r.name);
    let bobPush: Run | undefined;
    const atomic = await heldPush(
      r.wc,
      () => carol.git(r.wc, 'push', '--atomic', 'origin', 'main', 'side'),
      async () => {
        bobPush = await bob.git(r.wb, 'push', 'origin', 'HEAD:refs/heads/side');
      },
    );
    assert.equal(bobPush!.code, 0, bobPush!.stderr);
    assert.notEqual(atomic.code, 0, atomic.stderr);
    assert.match(atomic.stderr, /main -> main \(atomic push failed\)/);
    assert.match(atomic.stderr, /side -> side \(fetch first\)/);
    const listed = await agreed(r.url);
    assert.equal(listed.get('refs/heads/main'), r.first, 'main did not land');
    assert.equal(listed.get('refs/heads/side'), bobSide);
    assert.notEqual(listed.get('refs/heads/main'), mainNext);
    assert.notEqual(listed.get('refs/heads/side'), sideNext);
    // Bob's table holds what he pushed and nothing of carol's; hers holds what it held before.
    const bobsAfter = (await memberTable('bob', r.name))!;
    assert.deepEqual(
      bobsAfter.value.refs.map((e) => [e.ref, e.target]),
      bobsBefore.value.refs.map((e) => [e.ref, e.ref === 'refs/heads/side' ? bobSide : e.target]),
    );
    const carolsAfter = await memberTable('carol', r.name);
    assert.deepEqual(
      (carolsAfter?.value.refs ?? []).map((e) => [e.ref, e.target]),
      (carolsBefore?.value.refs ?? []).map((e) => [e.ref, e.target]),
    );
  });

  it("lists a maintainer's tag for everyone, and refuses the same name at another object unless forced", async () => {
    const r = await team('tagged');
    await bob.ok(r.wb, 'tag', '-a', '-m', 'one', 'v1');
    const tag = (await bob.ok(r.wb, 'rev-parse', 'v1')).trim();
    const pushed = await bob.git(r.wb, 'push', 'origin', 'v1');
    assert.equal(pushed.code, 0, pushed.stderr);
    const withTag = await agreed(r.url);
    assert.equal(
      withTag.get('refs/tags/v1'),
      tag,
      `${pushed.stderr}\n${JSON.stringify([...withTag])}\n${JSON.stringify((await memberTable('bob', r.name))?.value)}`,
    );
    const other = await commitFiles(carol, r.wc, { 'c.txt': 'carol\n' }, 'carol');
    await carol.ok(r.wc, 'tag', 'v1', other);
    const refused = await carol.git(r.wc, 'push', 'origin', 'refs/tags/v1');
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /! \[rejected\] +v1 -> v1 \(already exists\)/);
    assert.equal((await agreed(r.url)).get('refs/tags/v1'), tag);
    // Two maintainers creating one tag at once: the one who finds the other's after listing is
    // refused as git refuses it, before anything is written.
    await carol.ok(r.wc, 'tag', 'v2', other);
    await bob.ok(r.wb, 'tag', 'v2', r.first);
    let bobPush: Run | undefined;
    const raced = await heldPush(
      r.wc,
      () => carol.git(r.wc, 'push', 'origin', 'refs/tags/v2'),
      async () => {
        bobPush = await bob.git(r.wb, 'push', 'origin', 'refs/tags/v2');
      },
    );
    assert.equal(bobPush!.code, 0, bobPush!.stderr);
    assert.notEqual(raced.code, 0);
    assert.match(raced.stderr, /v2 -> v2 \(already exists\)/);
    assert.equal((await agreed(r.url)).get('refs/tags/v2'), r.first);
    assert.equal(
      (await memberTable('carol', r.name))?.value.refs.some((e) => e.ref === 'refs/tags/v2') ?? false,
      false,
    );
    // Forced, carol's tag replaces bob's for everyone.
    const forced = await carol.git(r.wc, 'push', '--force', 'origin', 'refs/tags/v1');
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal((await agreed(r.url)).get('refs/tags/v1'), other);
  });
});

/**
 * Alice's repository `name` at a first commit (`ready` given it, then), and her next commit's push
 * held after its listing while `naming` (given the first commit) makes bob a maintainer and bob
 * pushes main. Alice's push must be refused as git refuses one behind (`fetch first`), and every
 * reader list bob's main with no divergence.
 */
async function overtakenByBob(
  name: string,
  ready: (first: string) => Promise<void>,
  naming: (first: string) => Promise<void>,
): Promise<void> {
  assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const wa = await newRepo(alice, url);
  const first = await commitFiles(alice, wa, { 'f.txt': 'seed\n' }, 'seed');
  await alice.ok(wa, 'push', '-q', 'origin', 'main');
  await ready(first);
  await commitFiles(alice, wa, { 'a.txt': 'alice\n' }, 'alice');
  let bobs = '';
  const held = await heldPush(
    wa,
    () => alice.git(wa, 'push', 'origin', 'main'),
    async () => {
      await naming(first);
      const dir = bob.dir();
      await bob.ok(dir, 'clone', '-q', url, 'w');
      bobs = await commitFiles(bob, `${dir}/w`, { 'b.txt': 'bob\n' }, 'bob');
      await bob.ok(`${dir}/w`, 'push', '-q', 'origin', 'main');
    },
  );
  assert.notEqual(held.code, 0, held.stderr);
  assert.match(held.stderr, /\[rejected\] +main -> main \(fetch first\)/);
  const listed = await agreed(url);
  assert.equal(listed.get('refs/heads/main'), bobs);
  assert.deepEqual(
    [...listed.keys()].filter((k) => k.startsWith('refs/maintainers/')),
    [],
    'no divergence',
  );
}

/** Alice's table of `name` written by hand holding main at `first`, naming `maintainers`. */
async function tableAt(name: string, first: string, maintainers?: string[]): Promise<void> {
  const packs = (await hands.alice.refRecords(name)).get('refs/heads/main')!.packs;
  await hands.alice.writeTable(name, [{ ref: 'refs/heads/main', target: first, packs }], maintainers);
}

describe('a push that wrote ref records and then finds a table naming maintainers', () => {
  it("is judged against every writer's value, as a team's push: behind a maintainer's, fetch first", () =>
    // Alice's push listed ref records; before it writes, the repository moves onto a table naming bob.
    overtakenByBob(
      'late',
      () => Promise.resolve(),
      (first) => tableAt('late', first, [t.dids['bob.test']!]),
    ));
});

describe('a push to a table whose owner names a maintainer while it is on its way', () => {
  it("is judged against the new maintainer's value: behind it, fetch first, and no divergence", () =>
    // Alice's push listed the table with no maintainers; before it writes, she names bob (from
    // another command).
    overtakenByBob(
      'named',
      (first) => tableAt('named', first),
      async () => {
        const added = await alice.knotless('repo', 'maintainer', 'add', 'named', 'bob.test');
        assert.equal(added.code, 0, added.stderr);
      },
    ));
});

describe("a maintainer's PDS down", () => {
  let front: Proxy | undefined;
  let bobsPds: Proxy | undefined;
  after(async () => {
    await front?.close();
    await bobsPds?.close();
  });

  it('keeps the repository readable from the others in one sentence, and a push answers no ok it cannot prove', async () => {
    const r = await team('down');
    const bobs = await commitFiles(bob, r.wb, { 'b.txt': 'bob\n' }, 'bob');
    await bob.ok(r.wb, 'push', '-q', 'origin', 'main');
    await carol.ok(r.wc, 'pull', '-q', '--ff-only', 'origin', 'main');
    // Every request of alice and carol goes through one proxy; bob's account's through a second,
    // which goes down.
    bobsPds = await startProxy({ target: t.pdsOf['bob.test']! });
    front = await startProxy({
      target: t.pdsOf['alice.test']!,
      routes: { [t.dids['bob.test']!]: bobsPds.url },
    });
    const through = { KNOTLESS_SERVICE: front.url, KNOTLESS_RETRIES: '0' };
    extra['alice'] = through;
    extra['carol'] = through;
    const bobDid = t.dids['bob.test']!;

    // During a push: bob's PDS goes down after carol's listing; her write cannot be confirmed.
    const carols = await commitFiles(carol, r.wc, { 'c.txt': 'carol\n' }, 'carol');
    const during = await heldPush(
      r.wc,
      () => carol.git(r.wc, 'push', 'origin', 'main'),
      async () => {
        await bobsPds!.close();
        bobsPds = undefined;
      },
    );
    assert.notEqual(during.code, 0);
    const said = during.stderr.split('\n').filter((l) => l.startsWith('knotless: The refs of'));
    assert.equal(said.length, 1, during.stderr);
    assert.match(
      said[0]!,
      new RegExp(
        `^knotless: The refs of ${bobDid} \\(.*\\) could not be read after the push, so it could not be confirmed against theirs; what you pushed was withdrawn, try again\\.$`,
      ),
    );
    assert.match(during.stderr, /main -> main \(a maintainer's refs could not be read\)/);
    assert.doesNotMatch(during.stderr, /\n\s+\w+\.\.\w+ +main -> main\n/, 'no ok');
    // Withdrawn: carol's table does not hold her commit.
    assert.notEqual(
      (await memberTable('carol', r.name))?.value.refs.find((e) => e.ref === 'refs/heads/main')?.target,
      carols,
    );

    // During a read: the others' refs, and one sentence naming whose could not be read.
    const read = await ls(alice, r.url);
    const warned = read.stderr.split('\n').filter((l) => l.includes(bobDid));
    assert.equal(warned.length, 1, read.stderr);
    assert.match(
      warned[0]!,
      new RegExp(
        `^knotless: warning: the refs maintainer ${bobDid} pushed to alice\\.test/down could not be read \\(.*\\); the repository is read from the others$`,
      ),
    );
    assert.equal(read.refs.get('refs/heads/main'), r.first, "the others' value");
    const info = await alice.knotless('repo', 'info', `alice.test/${r.name}`, '--json');
    assert.equal(info.code, 0, info.stderr);
    assert.equal(info.stderr.split('\n').filter((l) => l.includes(bobDid)).length, 1, info.stderr);

    // A push while it is down: refused before anything is written, in one sentence.
    const before = await memberTable('carol', r.name);
    const refused = await carol.git(r.wc, 'push', 'origin', 'main');
    assert.notEqual(refused.code, 0);
    const sentence = refused.stderr.split('\n').filter((l) => l.startsWith('knotless: The refs of'));
    assert.equal(sentence.length, 1, refused.stderr);
    assert.match(
      sentence[0]!,
      new RegExp(
        `^knotless: The refs of ${bobDid} \\(.*\\) could not be read, and a push to alice\\.test/down is confirmed only against every maintainer's; nothing was pushed, try again when they can be read\\.$`,
      ),
    );
    assert.match(refused.stderr, /main -> main \(a maintainer's refs could not be read\)/);
    assert.equal((await memberTable('carol', r.name))?.cid, before?.cid, 'nothing written');
    void bobs;
    extra['alice'] = {};
    extra['carol'] = {};
  });
});
