// Everything else on a private repository: repo commit, --atomic, leases, compaction, pushes through
// the warm agent, a member's fork and push, tampered records refused, and a key rotation while
// pushes land losing nothing.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { accountBytes } from './helpers/account-dump.ts';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, refsOf, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test']);
let socket = '';
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  ...(socket === '' ? {} : { KNOTLESS_AGENT_SOCKET: socket }),
}));
const bob = useGitUser(t, 'bob.test', () => ({ KNOTLESS_COMPACT: '0' }));
const carol = useGitUser(t, 'carol.test');
const MARK = `MARKops${crypto.randomBytes(6).toString('hex')}`;

async function lsRemote(user: typeof alice, url: string): Promise<string> {
  return user.ok(user.dir(), 'ls-remote', url);
}

describe('a private repository works like a plain one', () => {
  let work = '';
  before(async () => {
    await t.ready;
    assert.equal((await alice.knotless('repo', 'create', 'ops', '--private')).code, 0);
    assert.equal((await bob.knotless('key', 'list')).code, 0);
    assert.equal((await carol.knotless('key', 'list')).code, 0);
    work = await newRepo(alice, 'knotless://alice.test/ops');
    await alice.ok(work, 'config', 'pack.compression', '0');
  });

  it('takes repo commit, --atomic, leases and compaction, and stays sealed', async () => {
    for (let i = 0; i < 4; i++) {
      await commitFiles(
        alice,
        work,
        { [`f${i}.txt`]: `${MARK} ${i}\n${crypto.randomBytes(12_000).toString('hex')}\n` },
        `c${i} ${MARK}`,
      );
      await alice.ok(work, 'push', '-q', 'origin', 'main');
    }
    const committed = await alice.knotless(
      'repo',
      'commit',
      'ops',
      '-m',
      `via repo commit ${MARK}`,
      '--add',
      `note.txt=${path.join(work, 'f0.txt')}`,
    );
    assert.equal(committed.code, 0, committed.stderr);
    await alice.ok(work, 'pull', '-q', '--rebase', 'origin', 'main');
    const tip = await commitFiles(alice, work, { 'a.txt': 'a\n' }, 'atomic');
    await alice.ok(work, 'push', '-q', '--atomic', 'origin', 'main', 'main:refs/heads/side');
    const stale = await alice.git(
      work,
      'push',
      '--force-with-lease=side:' + '1'.repeat(40),
      'origin',
      'HEAD~1:side',
    );
    assert.notEqual(stale.code, 0, 'a lease on a value the ref does not have fails');
    assert.match(stale.stderr, /stale info/);
    await alice.ok(work, 'push', '-q', `--force-with-lease=side:${tip}`, 'origin', 'HEAD~1:side');
    const moved = await alice.knotless('repo', 'default-branch', 'ops', 'side');
    assert.equal(moved.code, 0, moved.stderr);
    assert.equal((await alice.knotless('repo', 'default-branch', 'ops')).stdout, 'side\n');
    assert.equal((await alice.knotless('repo', 'default-branch', 'ops', 'main')).code, 0);
    const compacted = await alice.knotless('repo', 'compact', 'ops');
    assert.equal(compacted.code, 0, compacted.stderr);
    assert.match(compacted.stderr, /refs\/heads\/main: \d+ packs → \d+/);

    const clone = alice.dir();
    await alice.ok(clone, 'clone', '-q', 'knotless://alice.test/ops', 'c');
    assert.equal((await alice.ok(`${clone}/c`, 'rev-parse', 'HEAD')).trim(), tip);
    assert.equal(
      (await alice.ok(`${clone}/c`, 'rev-parse', 'origin/side')).trim(),
      (await alice.ok(work, 'rev-parse', 'HEAD~1')).trim(),
    );
    const { car, blobs } = await accountBytes(t, t.dids['alice.test']!);
    assert.equal(car.indexOf(MARK), -1);
    for (const b of blobs) {
      assert.equal(b.indexOf(MARK), -1);
      assert.notEqual(b.subarray(0, 4).toString('latin1'), 'PACK');
    }
  });

  it('pushes through the warm agent', async () => {
    let agent: RunningAgent | undefined;
    try {
      const at = path.join(t.tmpdir(), 'agent.sock');
      agent = await spawnAgent(at, { ...alice.env, KNOTLESS_COMPACT: '0' });
      socket = at;
      const tip = await commitFiles(alice, work, { 'agent.txt': `${MARK}\n` }, 'through the agent');
      await alice.ok(work, 'push', '-q', 'origin', 'main');
      const tip2 = await commitFiles(alice, work, { 'agent.txt': `${MARK} 2\n` }, 'through the agent again');
      await alice.ok(work, 'push', '-q', 'origin', 'main');
      assert.match(
        await lsRemote(alice, 'knotless://alice.test/ops'),
        new RegExp(`^${tip2}\trefs/heads/main$`, 'm'),
      );
      assert.notEqual(tip, tip2);
      // The helper asked the agent, which keeps no view of a private repository: its helpers list.
      // A first push into an empty private repository through the agent is sealed too (the agent's
      // view of an empty repository would otherwise say nothing of its privacy).
      assert.equal((await alice.knotless('repo', 'create', 'fresh', '--private')).code, 0);
      const fresh = await newRepo(alice, 'knotless://alice.test/fresh');
      await commitFiles(alice, fresh, { 'f.txt': `${MARK} fresh\n` }, `fresh ${MARK}`);
      await alice.ok(fresh, 'push', '-q', 'origin', 'main');
      await commitFiles(alice, fresh, { 'f.txt': `${MARK} again\n` }, `again ${MARK}`);
      await alice.ok(fresh, 'push', '-q', 'origin', 'main');
      assert.equal((await accountBytes(t, t.dids['alice.test']!)).car.indexOf(MARK), -1);
      // (Its listing runs beside the push: waited for as the agent prints it, for two minutes at
      // most, or until the agent exits: a guard against a hang that says what never came.)
      const running = agent;
      await new Promise<void>((resolve, reject) => {
        const done = (err?: Error) => {
          clearTimeout(bound);
          running.child.stderr?.off('data', check);
          running.child.off('exit', exited);
          if (err === undefined) resolve();
          else reject(err);
        };
        const never = (why: string) =>
          new Error(
            `the agent never said it keeps no view of the private repository (${why})\n${running.log()}`,
          );
        const check = () => {
          if (/a private repository, of which no view is kept/.test(running.log())) done();
        };
        const exited = () => done(never('it exited'));
        const bound = setTimeout(() => done(never('two minutes passed')), 120_000);
        running.child.stderr?.on('data', check);
        running.child.once('exit', exited);
        check();
      });
    } finally {
      socket = '';
      await agent?.stop();
    }
  });

  it('lets a member fork it, privately, and push to the fork', async () => {
    assert.equal((await alice.knotless('repo', 'share', 'ops', 'bob.test')).code, 0);
    const forked = await bob.knotless('repo', 'fork', 'alice.test/ops');
    assert.equal(forked.code, 0, forked.stderr);
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://bob.test/ops', 'c');
    const tip = await commitFiles(bob, `${dir}/c`, { 'bob.txt': `${MARK} bob\n` }, `bob ${MARK}`);
    await bob.ok(`${dir}/c`, 'push', '-q', 'origin', 'main');
    // The owner of the original, a member of the fork, reads it; a stranger does not.
    assert.match(
      await lsRemote(alice, 'knotless://bob.test/ops'),
      new RegExp(`^${tip}\trefs/heads/main$`, 'm'),
    );
    const refused = await carol.git(carol.dir(), 'ls-remote', 'knotless://bob.test/ops');
    assert.match(refused.stderr, /bob\.test\/ops is private, and this machine holds no key that opens it/);
    const { car, blobs } = await accountBytes(t, t.dids['bob.test']!);
    assert.equal(car.indexOf(MARK), -1);
    for (const b of blobs) assert.equal(b.indexOf(MARK), -1);
  });

  it('refuses pull requests and issues in one sentence', async () => {
    const issue = await bob.knotless('issue', 'create', 'alice.test/ops', '--title', 'x');
    assert.equal(issue.code, 2, issue.stderr);
    assert.match(
      issue.stderr,
      /^knotless: alice\.test\/ops is private, and pull requests and issues are public records/,
    );
  });

  it('loses no push when the key rotates while pushes land', async () => {
    assert.equal((await alice.knotless('repo', 'share', 'ops', 'carol.test')).code, 0);
    const base = (await alice.ok(work, 'rev-parse', 'HEAD')).trim();
    const tips = new Map<string, string>();
    for (let i = 0; i < 4; i++) {
      await alice.ok(work, 'checkout', '-q', '-b', `race-${i}`, base);
      tips.set(`race-${i}`, await commitFiles(alice, work, { [`race-${i}.txt`]: `${i}\n` }, `race ${i}`));
    }
    const pushes = [...tips.keys()].map((b) => alice.git(work, 'push', '-q', 'origin', b));
    const rotated = alice.knotless('repo', 'unshare', 'ops', 'carol.test');
    const results = await Promise.all([...pushes, rotated]);
    for (const r of results) assert.equal(r.code, 0, r.stderr);
    const listed = await lsRemote(alice, 'knotless://alice.test/ops');
    for (const [b, oid] of tips) assert.match(listed, new RegExp(`^${oid}\trefs/heads/${b}$`, 'm'));
    const clone = alice.dir();
    await alice.ok(clone, 'clone', '-q', 'knotless://alice.test/ops', 'c');
    for (const [b, oid] of tips)
      assert.equal((await alice.ok(`${clone}/c`, 'rev-parse', `origin/${b}`)).trim(), oid);
    assert.match(await refsOf(alice, `${clone}/c`, 'refs/remotes/'), /race-3/);
  });
});

after(() => {
  socket = '';
});
