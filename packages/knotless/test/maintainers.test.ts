// Maintainers (format.md, "Teams"): the owner names them with `knotless repo maintainer`, one write
// of the owner's ref table; every reader then computes the repository's refs from the owner's table
// and the maintainers' tables, each in its writer's own account (here on the network's second PDS),
// with the rule of records/team-refs.ts. A table in a non-maintainer's account counts for nothing; a
// value no entry supersedes is listed under refs/maintainers/<handle>/; a maintainer whose DID does
// not resolve is left out in one sentence; removing a maintainer keeps what the repository held.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';
import type { PackEntry } from 'knotless-core/records/ref-record';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
// Pushes write ref records (KNOTLESS_REF_TABLE=0; a new repository starts on its table by default):
// the tables here are written by hand from those records (tableHands), each as the test needs it.
const env = () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_REF_TABLE: '0' });
const alice = useGitUser(t, 'alice.test', env);
const bob = useGitUser(t, 'bob.test', env);
const carol = useGitUser(t, 'carol.test', env);
const hands = {
  alice: tableHands(t, 'alice.test'),
  bob: tableHands(t, 'bob.test'),
  carol: tableHands(t, 'carol.test'),
};

before(async () => {
  await t.ready;
  // The accounts are spread over both PDSes: bob's refs live on another PDS than alice's.
  assert.notEqual(t.pdsOf['alice.test'], t.pdsOf['bob.test']);
});

/** A file too big for a pack to travel inline in a record: its pack is blobs in the account. */
const big = (): string => crypto.randomBytes(48 * 1024).toString('base64');

/** `user`'s commits on top of `from`'s main, pushed to `user`'s own repository `name`: packs in their account. */
async function ownCommits(
  user: GitUser,
  handle: string,
  from: string,
  name: string,
  files: Record<string, string>[],
): Promise<{ commits: string[]; packs: Map<string, PackEntry[]> }> {
  const dir = user.dir();
  await user.ok(dir, 'clone', '-q', from, 'w');
  const w = `${dir}/w`;
  const made = await user.knotless('repo', 'create', name);
  assert.equal(made.code, 0, made.stderr);
  const commits: string[] = [];
  for (const [i, f] of files.entries()) {
    if (i > 0) await user.ok(w, 'checkout', '-q', 'origin/main');
    commits.push(await commitFiles(user, w, f, `change ${i}`));
    await user.ok(w, 'push', '-q', `knotless://${handle}/${name}`, `HEAD:refs/heads/c${i}`);
  }
  const records = await hands[handle.replace('.test', '') as keyof typeof hands].refRecords(name);
  return { commits, packs: new Map(commits.map((c, i) => [c, records.get(`refs/heads/c${i}`)!.packs])) };
}

/** Alice's repository `name` on a ref table: main at one commit. */
async function teamRepo(name: string): Promise<{ url: string; first: string; packs: PackEntry[] }> {
  const made = await alice.knotless('repo', 'create', name);
  assert.equal(made.code, 0, made.stderr);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(alice, url);
  const first = await commitFiles(alice, dir, { 'a.txt': 'first\n' }, 'first');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  const packs = (await hands.alice.refRecords(name)).get('refs/heads/main')!.packs;
  await hands.alice.writeTable(name, [{ ref: 'refs/heads/main', target: first, packs }]);
  return { url, first, packs };
}

async function listed(user: GitUser, url: string): Promise<{ refs: Map<string, string>; stderr: string }> {
  const ls = await user.git(user.dir(), 'ls-remote', url);
  assert.equal(ls.code, 0, ls.stderr);
  return { refs: lsRemote(ls.stdout), stderr: ls.stderr };
}

describe('knotless repo maintainer', () => {
  it('adds, lists and refuses as it should', async () => {
    await teamRepo('named');
    const none = await alice.knotless('repo', 'maintainer', 'list', 'named');
    assert.equal(none.code, 0, none.stderr);
    assert.equal(none.stdout, '');
    assert.match(none.stderr, /alice\.test\/named has no maintainers/);

    const add = await alice.knotless('repo', 'maintainer', 'add', 'named', 'bob.test');
    assert.equal(add.code, 0, add.stderr);
    assert.match(add.stderr, /bob\.test is a maintainer now/);
    const table = await hands.alice.readTable('named');
    assert.deepEqual(
      (table!.value as unknown as { maintainers: { did: string }[] }).maintainers.map((m) => m.did),
      [t.dids['bob.test']],
    );
    assert.equal(table!.value.seq, 1);
    const again = await alice.knotless('repo', 'maintainer', 'add', 'named', 'bob.test', '--json');
    assert.equal(again.code, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as { added: boolean }).added, false);
    // Nothing written the second time.
    assert.equal((await hands.alice.readTable('named'))!.cid, table!.cid);

    const text = await carol.knotless('repo', 'maintainer', 'list', 'alice.test/named');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`^bob\\.test  ${t.dids['bob.test']}  since \\S+\\n$`));
    const list = await carol.knotless('repo', 'maintainer', 'list', 'alice.test/named', '--json');
    assert.equal(list.code, 0, list.stderr);
    const got = JSON.parse(list.stdout) as { maintainers: { did: string; handle: string; since: string }[] };
    assert.deepEqual(
      got.maintainers.map((m) => [m.did, m.handle]),
      [[t.dids['bob.test'], 'bob.test']],
    );

    // Only the owner changes who maintains: bob, a maintainer, may not add carol.
    const theirs = await bob.knotless('repo', 'maintainer', 'add', 'alice.test/named', 'carol.test');
    assert.equal(theirs.code, 5);
    assert.match(
      theirs.stderr,
      /^knotless: Only alice\.test can change the maintainers of named; you are bob\.test\.\n$/,
    );
    const self = await alice.knotless('repo', 'maintainer', 'add', 'named', 'alice.test');
    assert.equal(self.code, 2);
    assert.match(
      self.stderr,
      /^knotless: You own alice\.test\/named; only another account can be its maintainer\.\n$/,
    );
    const verb = await alice.knotless('repo', 'maintainer', 'promote', 'named', 'bob.test');
    assert.equal(verb.code, 2);
    assert.match(verb.stderr, /takes add, remove or list, not promote/);

    // A repository still on ref records (made with KNOTLESS_REF_TABLE=0, as this file makes them):
    // the list reads who maintains as every reader does, and it has none; one that does not exist is
    // said so.
    const old = await alice.knotless('repo', 'create', 'on-records');
    assert.equal(old.code, 0, old.stderr);
    assert.equal(await hands.alice.readTable('on-records'), undefined);
    const plain = await carol.knotless('repo', 'maintainer', 'list', 'alice.test/on-records');
    assert.equal(plain.code, 0, plain.stderr);
    assert.equal(plain.stdout, '');
    assert.match(plain.stderr, /alice\.test\/on-records has no maintainers; only its owner pushes to it\./);
    const nowhere = await carol.knotless('repo', 'maintainer', 'list', 'alice.test/nope');
    assert.equal(nowhere.code, 7, nowhere.stderr);
    assert.match(nowhere.stderr, /^knotless: alice\.test\/nope does not exist; check the name\.\n$/);
    // Adding a maintainer to it moves it onto its table first (the list is a field of the table),
    // said in one line, then names them there.
    const moved = await alice.knotless('repo', 'maintainer', 'add', 'on-records', 'bob.test');
    assert.equal(moved.code, 0, moved.stderr);
    assert.match(
      moved.stderr,
      /^knotless: moved the 0 ref\(s\) of alice\.test\/on-records into its ref table first/m,
    );
    assert.match(moved.stderr, /^alice\.test\/on-records: bob\.test is a maintainer now/m);
    assert.deepEqual(
      (await hands.alice.readTable('on-records'))?.value.maintainers?.map((m) => m.did),
      [t.dids['bob.test']],
    );
    const missing = await alice.knotless('repo', 'maintainer', 'add', 'nope', 'bob.test');
    assert.equal(missing.code, 7, missing.stderr);
  });
});

describe("readers compute the refs from the owner's and the maintainers' tables", () => {
  it("follows a maintainer's value that supersedes the owner's, with its packs from the maintainer's PDS", async () => {
    const { url, first } = await teamRepo('shared');
    const aliceDid = t.dids['alice.test']!;
    // Bob's own repository of the same name holds his commit's packs; his table of alice's is another key.
    const mine = await ownCommits(bob, 'bob.test', url, 'shared', [{ 'b.txt': 'bob\n', 'big.txt': big() }]);
    const second = mine.commits[0]!;
    assert.ok(
      mine.packs.get(second)!.some((p) => (p.parts ?? []).length > 0),
      'a pack of blobs',
    );
    await hands.bob.writeMemberTable(aliceDid, 'shared', [
      {
        ref: 'refs/heads/main',
        target: second,
        packs: mine.packs.get(second)!,
        over: [{ did: aliceDid, target: first }],
      },
    ]);
    // Not a maintainer yet: bob's table counts for nothing.
    assert.equal((await listed(carol, url)).refs.get('refs/heads/main'), first);

    assert.equal((await alice.knotless('repo', 'maintainer', 'add', 'shared', 'bob.test')).code, 0);
    const now = await listed(carol, url);
    assert.equal(now.refs.get('refs/heads/main'), second);
    assert.equal(now.refs.get('HEAD'), second);
    assert.equal(
      [...now.refs.keys()].some((r) => r.startsWith('refs/maintainers/')),
      false,
    );
    // Bob's own repository of the same name is untouched by his table of alice's.
    assert.equal((await listed(carol, 'knotless://bob.test/shared')).refs.get('refs/heads/c0'), second);

    // A clone reads bob's pack from bob's PDS.
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', url, 'c');
    assert.equal((await carol.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), second);
    assert.equal(await carol.ok(`${dir}/c`, 'show', 'HEAD:b.txt'), 'bob\n');
    const info = await carol.knotless('repo', 'info', 'alice.test/shared', '--json');
    assert.equal(info.code, 0, info.stderr);

    // A non-maintainer's table under the repository's key counts for nothing, whatever it says.
    await hands.carol.writeMemberTable(aliceDid, 'shared', [
      {
        ref: 'refs/heads/main',
        target: first,
        packs: [],
        over: [
          { did: aliceDid, target: first },
          { did: t.dids['bob.test']!, target: second },
        ],
      },
      { ref: 'refs/heads/carols', target: first, packs: [] },
    ]);
    const after = await listed(bob, url);
    assert.equal(after.refs.get('refs/heads/main'), second);
    assert.equal(after.refs.has('refs/heads/carols'), false);
  });

  it('lists a value no entry supersedes under refs/maintainers/<handle>/, and ignores a table naming another repository', async () => {
    const { url, first } = await teamRepo('split');
    const aliceDid = t.dids['alice.test']!;
    const mine = await ownCommits(bob, 'bob.test', url, 'split-own', [{ 'b.txt': 'bob\n' }]);
    const bobs = mine.commits[0]!;
    assert.equal((await alice.knotless('repo', 'maintainer', 'add', 'split', 'bob.test')).code, 0);
    // Bob's entry replaced a value alice's main never had: it does not supersede hers.
    await hands.bob.writeMemberTable(aliceDid, 'split', [
      {
        ref: 'refs/heads/main',
        target: bobs,
        packs: mine.packs.get(bobs)!,
        over: [{ did: aliceDid, target: bobs.replace(/^./, (c) => (c === '0' ? '1' : '0')) }],
      },
      { ref: 'refs/heads/topic', target: bobs, packs: mine.packs.get(bobs)!, over: [{ did: aliceDid }] },
    ]);
    const split = await listed(carol, url);
    assert.equal(split.refs.get('refs/heads/main'), first);
    assert.equal(split.refs.get('refs/maintainers/bob.test/heads/main'), bobs);
    assert.equal(split.refs.get('refs/heads/topic'), bobs);
    assert.equal(split.refs.has('refs/maintainers/bob.test/heads/topic'), false);
    // Both values fetch.
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', url, 'c');
    await carol.ok(
      `${dir}/c`,
      'fetch',
      '-q',
      'origin',
      'refs/maintainers/bob.test/heads/main:refs/remotes/bob/main',
    );
    assert.equal((await carol.ok(`${dir}/c`, 'rev-parse', 'bob/main')).trim(), bobs);

    // A maintainer's table that names another repository is refused: the repository is read without it.
    await hands.bob.writeMemberTable(
      aliceDid,
      'split',
      [{ ref: 'refs/heads/main', target: bobs, packs: [], over: [{ did: aliceDid, target: first }] }],
      `at://${aliceDid}/dev.knotless.repo/other`,
    );
    const refused = await listed(carol, url);
    assert.equal(refused.refs.get('refs/heads/main'), first);
    assert.equal(refused.refs.has('refs/maintainers/bob.test/heads/main'), false);
    assert.match(
      refused.stderr,
      /knotless: warning: the refs maintainer did:plc:[a-z0-9]+ pushed to alice\.test\/split could not be read \(The ref table of .* is invalid \(it names another repository\); .*\); the repository is read from the others\n/,
    );
  });

  it('reads the repository from the others when a maintainer does not resolve', async () => {
    const { url, first, packs } = await teamRepo('ghost');
    const ghost = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa';
    await hands.alice.writeTable('ghost', [{ ref: 'refs/heads/main', target: first, packs }], [ghost]);
    const ls = await listed(carol, url);
    assert.equal(ls.refs.get('refs/heads/main'), first);
    const warned = ls.stderr.split('\n').filter((l) => l.includes(ghost));
    assert.equal(warned.length, 1, ls.stderr);
    assert.match(
      warned[0]!,
      /^knotless: warning: the refs maintainer did:plc:a{24} pushed to alice\.test\/ghost could not be read \(.*\); the repository is read from the others$/,
    );
    const list = await carol.knotless('repo', 'maintainer', 'list', 'alice.test/ghost', '--json');
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(
      (JSON.parse(list.stdout) as { maintainers: { did: string; handle: null }[] }).maintainers.map((m) => [
        m.did,
        m.handle,
      ]),
      [[ghost, null]],
    );
  });
});

describe('removing a maintainer', () => {
  it('keeps what the repository held, and counts nothing they write later', async () => {
    const { url, first } = await teamRepo('leaving');
    const aliceDid = t.dids['alice.test']!;
    const bobDid = t.dids['bob.test']!;
    const mine = await ownCommits(bob, 'bob.test', url, 'leaving-own', [
      { 'b.txt': 'bob\n', 'big.txt': big() },
      { 'c.txt': 'later\n' },
    ]);
    const [kept, later] = mine.commits as [string, string];
    const blobs = mine.packs.get(kept)!.flatMap((p) => p.parts ?? []);
    assert.ok(blobs.length > 0, 'a pack of blobs');
    assert.equal((await alice.knotless('repo', 'maintainer', 'add', 'leaving', 'bob.test')).code, 0);
    await hands.bob.writeMemberTable(aliceDid, 'leaving', [
      {
        ref: 'refs/heads/main',
        target: kept,
        packs: mine.packs.get(kept)!,
        over: [{ did: aliceDid, target: first }],
      },
      { ref: 'refs/heads/only-bob', target: kept, packs: mine.packs.get(kept)!, over: [{ did: aliceDid }] },
    ]);
    assert.equal((await listed(carol, url)).refs.get('refs/heads/main'), kept);

    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'leaving', 'bob.test', '--json');
    assert.equal(removed.code, 0, removed.stderr);
    const out = JSON.parse(removed.stdout) as { removed: boolean; kept: string[] };
    assert.equal(out.removed, true);
    assert.deepEqual(out.kept, ['refs/heads/main', 'refs/heads/only-bob']);
    const table = (await hands.alice.readTable('leaving'))!.value as unknown as {
      maintainers?: unknown[];
      refs: { ref: string; target: string; over?: unknown }[];
    };
    assert.equal(table.maintainers, undefined);
    assert.deepEqual(
      table.refs.map((r) => [r.ref, r.target]),
      [
        ['refs/heads/main', kept],
        ['refs/heads/only-bob', kept],
      ],
    );

    // Bob writes on: it counts for nothing.
    await hands.bob.writeMemberTable(aliceDid, 'leaving', [
      {
        ref: 'refs/heads/main',
        target: later,
        packs: mine.packs.get(later)!,
        over: [{ did: aliceDid, target: kept }],
      },
    ]);
    const ls = await listed(carol, url);
    assert.equal(ls.refs.get('refs/heads/main'), kept);
    assert.equal(ls.refs.get('refs/heads/only-bob'), kept);
    // The kept commit's pack is now in alice's account: the clone reads it there.
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', url, 'c');
    assert.equal(await carol.ok(`${dir}/c`, 'show', 'HEAD:b.txt'), 'bob\n');
    // Its blobs are alice's now: her PDS serves each of them.
    for (const b of blobs) {
      const get = new URL('/xrpc/com.atproto.sync.getBlob', t.pdsOf['alice.test']);
      get.searchParams.set('did', aliceDid);
      get.searchParams.set('cid', b.ref.$link);
      assert.equal((await fetch(get)).status, 200);
    }
    assert.equal(bobDid.startsWith('did:'), true);

    const twice = await alice.knotless('repo', 'maintainer', 'remove', 'leaving', 'bob.test');
    assert.equal(twice.code, 0, twice.stderr);
    assert.match(twice.stderr, /bob\.test is not one of its maintainers; nothing changed/);
  });
});

describe("a maintainer's push", () => {
  it("writes the maintainer's own table in their account, and every reader follows it", async () => {
    const { url, first } = await teamRepo('pushed');
    const aliceDid = t.dids['alice.test']!;
    const bobDid = t.dids['bob.test']!;
    assert.equal((await alice.knotless('repo', 'maintainer', 'add', 'pushed', 'bob.test')).code, 0);
    const before = (await hands.alice.readTable('pushed'))!;

    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', url, 'w');
    const w = `${dir}/w`;
    const second = await commitFiles(bob, w, { 'b.txt': 'bob\n', 'big.txt': big() }, 'bob');
    const push = await bob.git(w, 'push', 'origin', 'main');
    assert.equal(push.code, 0, push.stderr);
    assert.match(push.stderr, new RegExp(`${first.slice(0, 7)}\\.\\.${second.slice(0, 7)} +main -> main`));
    // Alice's table is untouched; bob's is in his own account, under the repository's key.
    assert.equal((await hands.alice.readTable('pushed'))!.cid, before.cid);
    const key = `pushed~${aliceDid}`;
    const mine = (await hands.bob.readTable(key))!.value as unknown as {
      repo: string;
      head?: string;
      packs: { parts?: unknown[] }[];
      refs: { ref: string; target: string; over: { did: string; target?: string }[] }[];
    };
    assert.equal(mine.repo, `at://${aliceDid}/dev.knotless.repo/pushed`);
    assert.equal(mine.head, undefined);
    assert.deepEqual(
      mine.refs.map((r) => [r.ref, r.target, r.over]),
      [['refs/heads/main', second, [{ did: aliceDid, target: first }]]],
    );
    assert.ok(
      mine.packs.some((p) => (p.parts ?? []).length > 0),
      "a pack of blobs, in bob's account",
    );
    const ls = await listed(carol, url);
    assert.equal(ls.refs.get('refs/heads/main'), second);
    const c = carol.dir();
    await carol.ok(c, 'clone', '-q', url, 'c');
    assert.equal(await carol.ok(`${c}/c`, 'show', 'HEAD:b.txt'), 'bob\n');

    // The owner builds on it: her entry names bob's value, and readers follow hers.
    const a = alice.dir();
    await alice.ok(a, 'clone', '-q', url, 'w');
    const third = await commitFiles(alice, `${a}/w`, { 'a.txt': 'third\n' }, 'third');
    const owners = await alice.git(`${a}/w`, 'push', 'origin', 'main');
    assert.equal(owners.code, 0, owners.stderr);
    const hers = (await hands.alice.readTable('pushed'))!.value as unknown as {
      refs: { ref: string; target: string; over?: { did: string; target?: string }[] }[];
      maintainers: { did: string }[];
    };
    assert.deepEqual(
      hers.refs.find((r) => r.ref === 'refs/heads/main'),
      {
        ...hers.refs.find((r) => r.ref === 'refs/heads/main'),
        target: third,
        over: [{ did: bobDid, target: second }],
      },
    );
    assert.deepEqual(
      hers.maintainers.map((m) => m.did),
      [bobDid],
    );
    assert.equal((await listed(carol, url)).refs.get('refs/heads/main'), third);

    // Bob, behind, is refused as git refuses a push behind the remote; nothing of his counts.
    const behind = await commitFiles(bob, w, { 'b.txt': 'behind\n' }, 'behind');
    const refused = await bob.git(w, 'push', 'origin', 'main');
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /! \[rejected\] +main -> main \(fetch first\)/);
    assert.equal((await listed(carol, url)).refs.get('refs/heads/main'), third);
    // After a pull it lands, and the merge is the repository's value.
    await bob.ok(w, 'pull', '-q', '--no-rebase', '--no-edit', 'origin', 'main');
    const merged = (await bob.ok(w, 'rev-parse', 'HEAD')).trim();
    const ok = await bob.git(w, 'push', 'origin', 'main');
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal((await listed(carol, url)).refs.get('refs/heads/main'), merged);
    assert.equal(await bob.ok(w, 'merge-base', '--is-ancestor', behind, merged), '');

    // Bob deletes a branch he made: a tombstone in his table, gone for every reader.
    await bob.ok(w, 'push', '-q', 'origin', 'HEAD:refs/heads/topic');
    assert.equal((await listed(carol, url)).refs.get('refs/heads/topic'), merged);
    await bob.ok(w, 'push', '-q', 'origin', ':refs/heads/topic');
    assert.equal((await listed(carol, url)).refs.has('refs/heads/topic'), false);

    // Carol is no maintainer: refused, nothing written.
    const theirs = await carol.git(`${c}/c`, 'push', 'origin', 'HEAD:refs/heads/carol');
    assert.notEqual(theirs.code, 0);
    assert.match(
      theirs.stderr,
      /permission denied: you are carol\.test, and only alice\.test can push to alice\.test\/pushed/,
    );
    assert.equal(await hands.carol.readTable(key), undefined);

    // Removed, bob pushes no more.
    assert.equal((await alice.knotless('repo', 'maintainer', 'remove', 'pushed', 'bob.test')).code, 0);
    await commitFiles(bob, w, { 'b.txt': 'after\n' }, 'after');
    const gone = await bob.git(w, 'push', 'origin', 'main');
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /permission denied: you are bob\.test/);
    assert.equal((await listed(carol, url)).refs.get('refs/heads/main'), merged);
  });
});
