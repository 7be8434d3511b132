// Maintainers of a private repository (format.md, "Private repositories"; the owner on the network's
// first PDS, the maintainer bob on its second): naming one makes them a member and moves the
// repository onto its table, sealed; the maintainer's pushes are sealed in their own account with
// the repository's key; every member reads the team's refs and packs from both accounts, anyone
// else is refused in one sentence; a maintainer is not unshared while they maintain, and once
// removed and unshared reads nothing new, while what they pushed stays.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { before, describe, it } from 'node:test';
import { refTableKey } from 'knotless-core/records/ref-table';
import path from 'node:path';
import { accountBytes } from './helpers/account-dump.ts';
import { spawnAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0' }));
let bobSocket = '';
const bob = useGitUser(t, 'bob.test', () => ({
  KNOTLESS_COMPACT: '0',
  ...(bobSocket === '' ? {} : { KNOTLESS_AGENT_SOCKET: bobSocket }),
}));
const carol = useGitUser(t, 'carol.test');
const MARK = `MARKteam${crypto.randomBytes(6).toString('hex')}`;
const URL = 'knotless://alice.test/sec';
const pdsOf = (h: string) => t.pdsOf[h] ?? t.net.pdsUrl;

/** A record as its PDS serves it to anyone; undefined when there is none. */
async function rawRecord(
  handle: string,
  collection: string,
  rkey: string,
): Promise<Record<string, unknown> | undefined> {
  const q = new URLSearchParams({ repo: t.dids[handle]!, collection, rkey });
  const res = await fetch(`${pdsOf(handle)}/xrpc/com.atproto.repo.getRecord?${q}`);
  if (res.status === 400) return undefined;
  assert.equal(res.status, 200);
  return ((await res.json()) as { value: Record<string, unknown> }).value;
}

/** The account's records and blobs, read as anyone reads them, hold nothing of MARK. */
async function nothingInClear(handle: string): Promise<void> {
  const { car, blobs } = await accountBytes(t, t.dids[handle]!, pdsOf(handle));
  assert.equal(car.indexOf(MARK), -1, `${handle}'s records hold the marker`);
  for (const [i, b] of blobs.entries()) {
    assert.equal(b.indexOf(MARK), -1, `${handle}'s blob ${i} holds the marker`);
    assert.notEqual(b.subarray(0, 4).toString('latin1'), 'PACK', `${handle}'s blob ${i} is a git pack`);
  }
}

async function mainOf(user: GitUser): Promise<string | undefined> {
  const out = await user.ok(user.dir(), 'ls-remote', URL);
  return /^([0-9a-f]{40})\trefs\/heads\/main$/m.exec(out)?.[1];
}

describe('maintainers of a private repository', () => {
  let work = '';
  let bobs = '';
  let bobWork = '';
  before(async () => {
    await t.ready;
    await Promise.all([alice.ready, bob.ready, carol.ready]);
    assert.notEqual(
      t.pdsOf['alice.test'],
      t.pdsOf['bob.test'],
      'the owner and the maintainer are on two PDSes',
    );
    assert.equal((await alice.knotless('repo', 'create', 'sec', '--private')).code, 0);
    // Publishes each one's key, as `repo share` needs.
    for (const u of [bob, carol]) assert.equal((await u.knotless('key', 'list')).code, 0);
    work = await newRepo(alice, URL);
    await commitFiles(alice, work, { 'a.txt': `${MARK} alice\n` }, `first ${MARK}`);
    await alice.ok(work, 'push', '-q', 'origin', 'main', `main:refs/heads/${MARK}`);
  });

  it('makes a maintainer a member, and moves the repository onto its table, sealed', async () => {
    const added = await alice.knotless('repo', 'maintainer', 'add', 'sec', 'bob.test');
    assert.equal(added.code, 0, added.stderr);
    assert.match(added.stderr, /^Shared alice\.test\/sec with bob\.test \(did:plc:[a-z0-9]+\), 1 key/m);
    assert.match(added.stderr, /moved the 2 ref\(s\) of alice\.test\/sec into its ref table first/);
    assert.match(added.stderr, /bob\.test is a maintainer now/);
    const table = await rawRecord('alice.test', 'dev.knotless.refs', 'sec');
    assert.deepEqual(Object.keys(table ?? {}).sort(), ['$type', 'blobs', 'epoch', 'repo', 'sealed']);
    await nothingInClear('alice.test');
    // Named again: a member already, nothing shared twice.
    const again = await alice.knotless('repo', 'maintainer', 'add', 'sec', 'bob.test');
    assert.equal(again.code, 0, again.stderr);
    assert.doesNotMatch(again.stderr, /Shared/);
  });

  it("takes the maintainer's push, sealed in their own account, and every member reads it", async () => {
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', URL, 'w');
    bobWork = `${dir}/w`;
    bobs = await commitFiles(
      bob,
      `${dir}/w`,
      { 'b.txt': `${MARK} bob\n${crypto.randomBytes(40_000).toString('hex')}\n` },
      `bob ${MARK}`,
    );
    const pushed = await bob.git(`${dir}/w`, 'push', 'origin', 'main');
    assert.equal(pushed.code, 0, pushed.stderr);
    const key = refTableKey('sec', t.dids['alice.test']!, t.dids['bob.test']!);
    const his = await rawRecord('bob.test', 'dev.knotless.refs', key);
    assert.deepEqual(Object.keys(his ?? {}).sort(), ['$type', 'blobs', 'epoch', 'repo', 'sealed']);
    await nothingInClear('bob.test');
    assert.equal(await mainOf(alice), bobs);
    // Carol is no member: refused in one sentence, nothing listed.
    const refused = await carol.git(carol.dir(), 'ls-remote', URL);
    assert.notEqual(refused.code, 0);
    assert.match(
      refused.stderr,
      /^knotless: alice\.test\/sec is private, and this machine holds no key that opens it/m,
    );
    assert.doesNotMatch(refused.stdout, /refs\//);
    // Through his agent too, which keeps no view of a private repository (its helper reads it cold).
    const at = path.join(t.tmpdir(), 'agent.sock');
    const agent = await spawnAgent(at, { ...bob.env, KNOTLESS_COMPACT: '0' });
    try {
      bobSocket = at;
      bobs = await commitFiles(bob, bobWork, { 'b2.txt': `${MARK} bob 2\n` }, 'bob, through his agent');
      const through = await bob.git(bobWork, 'push', 'origin', 'main');
      assert.equal(through.code, 0, through.stderr);
      // The agent was asked, and said why it keeps no view: its listing starts once the owner's
      // PDS's stream has shown it is live, by a message, which alice's next write (sharing the
      // repository with carol) sends.
      assert.equal((await alice.knotless('repo', 'share', 'sec', 'carol.test')).code, 0);
      while (!/a private repository, of which no view is kept/.test(agent.log())) {
        assert.equal(agent.child.exitCode, null, `the agent exited: ${agent.log()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      bobSocket = '';
      await agent.stop();
    }
    assert.equal(await mainOf(alice), bobs);
    await nothingInClear('bob.test');
    // Shared with her, she reads the team's refs, and bob's packs from his account.
    const cdir = carol.dir();
    await carol.ok(cdir, 'clone', '-q', URL, 'c');
    assert.equal((await carol.ok(`${cdir}/c`, 'rev-parse', 'HEAD')).trim(), bobs);
    assert.match(await carol.ok(`${cdir}/c`, 'show', 'HEAD:b.txt'), new RegExp(`^${MARK} bob`));
    // She forks it, privately, with bob's packs copied from his account into hers.
    const forked = await carol.knotless('repo', 'fork', 'alice.test/sec');
    assert.equal(forked.code, 0, forked.stderr);
    await carol.ok(cdir, 'clone', '-q', 'knotless://carol.test/sec', 'fork');
    assert.equal((await carol.ok(`${cdir}/fork`, 'rev-parse', 'HEAD')).trim(), bobs);
    assert.match(await carol.ok(`${cdir}/fork`, 'show', 'HEAD:b.txt'), new RegExp(`^${MARK} bob`));
    await nothingInClear('carol.test');
    // Bob commits without a clone: into his own sealed table, and alice lists it.
    const note = path.join(bob.dir(), 'note.txt');
    fs.writeFileSync(note, `${MARK} note\n`);
    const committed = await bob.knotless(
      'repo',
      'commit',
      'alice.test/sec',
      '-m',
      'a note',
      '--add',
      `note.txt=${note}`,
    );
    assert.equal(committed.code, 0, committed.stderr);
    bobs = committed.stdout.trim();
    assert.equal(await mainOf(alice), bobs);
    await nothingInClear('bob.test');
  });

  it("counts a maintainer's table only sealed, and only in the account it was sealed for", async () => {
    // Carol, a member already, is named without being shared with again.
    const named = await alice.knotless('repo', 'maintainer', 'add', 'sec', 'carol.test');
    assert.equal(named.code, 0, named.stderr);
    assert.doesNotMatch(named.stderr, /Shared/);
    const owner = t.dids['alice.test']!;
    const carols = tableHands(t, 'carol.test');
    const hers = refTableKey('sec', owner, t.dids['carol.test']!);
    const bobsTable = await rawRecord(
      'bob.test',
      'dev.knotless.refs',
      refTableKey('sec', owner, t.dids['bob.test']!),
    );
    const cases: [string, () => Promise<void>, RegExp][] = [
      [
        "bob's sealed table, copied into carol's account",
        async () => void (await carols.put('dev.knotless.refs', hers, bobsTable!)),
        /A ref table of the private repository does not decrypt/,
      ],
      [
        'a table in the clear, naming a commit of her own',
        () =>
          carols.writeMemberTable(owner, 'sec', [
            { ref: 'refs/heads/main', target: 'c'.repeat(40), packs: [] },
          ]),
        /is not sealed, and the repository is private/,
      ],
    ];
    for (const [what, write, why] of cases) {
      await write();
      const res = await alice.git(alice.dir(), 'ls-remote', URL);
      assert.equal(res.code, 0, `${what}: ${res.stderr}`);
      assert.match(
        res.stderr,
        /the refs maintainer did:plc:[a-z0-9]+ pushed to alice\.test\/sec could not be read/,
        what,
      );
      assert.match(res.stderr, why, what);
      assert.match(res.stdout, new RegExp(`^${bobs}\trefs/heads/main$`, 'm'), what);
    }
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'sec', 'carol.test');
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal(await mainOf(alice), bobs);
  });

  it("refuses the owner's push that lacks the maintainer's, as git says it", async () => {
    await commitFiles(alice, work, { 'a2.txt': 'alice again\n' }, 'alice, not fetched');
    const refused = await alice.git(work, 'push', 'origin', 'main');
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /\[rejected\]\s+main -> main \(fetch first\)/);
    assert.equal(await mainOf(alice), bobs);
  });

  it('does not unshare a maintainer; removed and unshared, they read nothing new, and what they pushed stays', async () => {
    const early = await alice.knotless('repo', 'unshare', 'sec', 'bob.test');
    assert.equal(early.code, 2, early.stderr);
    assert.equal(
      early.stderr,
      'knotless: bob.test is a maintainer of alice.test/sec, and a maintainer reads what they push; remove them as one first (`knotless repo maintainer remove sec bob.test`), then unshare. Nothing was changed.\n',
    );
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'sec', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    const unshared = await alice.knotless('repo', 'unshare', 'sec', 'bob.test');
    assert.equal(unshared.code, 0, unshared.stderr);
    assert.match(unshared.stderr, /key epoch 1, 2 refs sealed again/);
    assert.equal((await rawRecord('alice.test', 'dev.knotless.refs', 'sec'))?.['epoch'], 1);
    // Bob's commit stays the repository's; alice builds on it.
    await alice.ok(work, 'reset', '-q', '--hard', 'HEAD~1');
    await alice.ok(work, 'pull', '-q', 'origin', 'main');
    const next = await commitFiles(alice, work, { 'n.txt': `${MARK} after\n` }, 'after bob');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await nothingInClear('alice.test');
    // Carol's ring predates the rotation: it is read again, and she reads on.
    assert.equal(await mainOf(carol), next);
    const denied = await bob.git(bob.dir(), 'ls-remote', URL);
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /alice\.test\/sec is private, and this machine holds no key that opens it/);
    // Nor can he push: he can no longer read what his push would be judged against.
    await commitFiles(bob, bobWork, { 'late.txt': 'late\n' }, 'late');
    const late = await bob.git(bobWork, 'push', 'origin', 'main');
    assert.notEqual(late.code, 0);
    assert.match(late.stderr, /alice\.test\/sec is private, and this machine holds no key that opens it/);
    assert.equal(await mainOf(alice), next);
  });

  it('compacts its sealed table, and a fresh clone reads it whole', async () => {
    const compacted = await alice.knotless('repo', 'compact', 'sec');
    assert.equal(compacted.code, 0, compacted.stderr);
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', URL, 'again');
    assert.equal((await carol.ok(`${dir}/again`, 'rev-parse', 'HEAD')).trim(), await mainOf(alice));
    assert.match(await carol.ok(`${dir}/again`, 'show', 'HEAD:b.txt'), new RegExp(`^${MARK} bob`));
    await nothingInClear('alice.test');
    // And a member verifies it: its sealed table's proof, and each ref.
    const verified = await carol.knotless('verify', 'alice.test/sec', '--json');
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, /refs\/heads\/main/);
  });
});
