import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { compactionsDone } from './helpers/compacting.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { storedPacks } from './helpers/ref-packs.ts';

// What a loop of small pushes costs at the PDS, background compaction included, with
// compaction on (the default), to repositories on their ref table (the default too). Every process (helper, agent, detached `repo compact`) talks to the
// PDS through one counting proxy.
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let socket = '';
let agent: RunningAgent | undefined;
const via = () => (proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url });
const plain = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT: '0', ...via() }));
const warm = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT_SOCKET: socket, ...via() }));

before(async () => {
  await t.ready;
  // The agent's connections are told apart from the helpers', so that its variant proves it carried them.
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
  socket = path.join(t.tmpdir(), 'agent.sock');
});
after(() => proxy?.close());

const PUSHES = 20;
const WRITES = new Set([
  'com.atproto.repo.putRecord',
  'com.atproto.repo.createRecord',
  'com.atproto.repo.deleteRecord',
  'com.atproto.repo.applyWrites',
]);

/** The pack list of a ref, read straight from the PDS (not through the proxy): its table's entry. */
const packsOf = (repo: string, ref: string) => storedPacks(t, 'alice.test', repo, ref);

/** 20 one-line pushes after a first push; returns what reached the PDS during the 20. */
async function loop(
  user: GitUser,
  name: string,
): Promise<{
  writes: number;
  writesByAgent: number;
  requests: number;
  uploads: number;
  dir: string;
  names: string[];
}> {
  assert.equal((await user.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(user, url);
  const lines = ['first line'];
  await commitFiles(user, dir, { 'notes.txt': lines.join('\n') + '\n', README: 'a loop\n' }, 'start');
  await user.ok(dir, 'push', '-q', 'origin', 'main');
  await compactionsDone(user);
  proxy!.reset();
  for (let i = 0; i < PUSHES; i++) {
    lines.push(`line ${i} of the loop`);
    await commitFiles(user, dir, { 'notes.txt': lines.join('\n') + '\n' }, `push ${i}`);
    await user.ok(dir, 'push', '-q', 'origin', 'main');
  }
  await compactionsDone(user);
  const names = proxy!.requests.map((r) => r.nsid ?? r.path);
  const agentPid = agent?.child.pid;
  return {
    writes: names.filter((n) => WRITES.has(n)).length,
    writesByAgent: proxy!.requests.filter(
      (r) => WRITES.has(r.nsid ?? '') && r.pid !== undefined && r.pid === agentPid,
    ).length,
    requests: names.length,
    uploads: names.filter((n) => n === 'com.atproto.repo.uploadBlob').length,
    dir,
    names,
  };
}

/** A fresh clone has the same history and tree as the pusher's repository, and fsck finds nothing. */
async function roundTrips(user: GitUser, name: string, dir: string): Promise<void> {
  const out = user.dir();
  await user.ok(out, 'clone', '-q', `knotless://alice.test/${name}`, 'c');
  const clone = path.join(out, 'c');
  await user.ok(clone, 'fsck', '--full', '--strict');
  for (const rev of ['HEAD', 'HEAD^{tree}']) {
    assert.equal(await user.ok(clone, 'rev-parse', rev), await user.ok(dir, 'rev-parse', rev));
  }
  assert.equal(
    await user.ok(clone, 'log', '--format=%H %T', 'main'),
    await user.ok(dir, 'log', '--format=%H %T', 'main'),
  );
}

/** The pack list stays logarithmic in the number of pushes. */
async function logarithmic(name: string): Promise<void> {
  const packs = await packsOf(name, 'refs/heads/main');
  const bound = Math.log2(PUSHES + 1) + 2;
  assert.ok(
    packs.length <= bound,
    `${packs.length} packs after ${PUSHES + 1} pushes (bound ${bound.toFixed(1)})`,
  );
}

describe('20 small pushes in a loop, compaction on', () => {
  // Before the network's own `after`: the PDS waits for open event streams when it closes.
  after(() => agent?.stop());

  it('cost at most 22 record writes and 66 requests in all without the agent', async (tc) => {
    const c = await loop(plain, 'cost-plain');
    tc.diagnostic(`writes ${c.writes}, requests ${c.requests}, uploads ${c.uploads}: ${c.names.join(' ')}`);
    // Each push to the repository's ref table lists (the table's proof, the ignored ref records beside
    // it) and writes the table once, swapped on the CID it read: 3 requests, 1 write (performance.md,
    // "push to a repository on a ref table"); compaction may add at most 2 writes and 6 requests.
    assert.ok(c.writes <= PUSHES + 2, `${c.writes} record writes`);
    assert.ok(c.requests <= 3 * PUSHES + 6, `${c.requests} requests`);
    assert.equal(c.writesByAgent, 0);
    assert.equal(c.uploads, 0, 'one-line pushes stay inline, merged packs too');
    await logarithmic('cost-plain');
    await roundTrips(plain, 'cost-plain', c.dir);
  });

  it('cost at most 22 record writes and 46 requests in all through the agent', async (tc) => {
    agent ??= await spawnAgent(socket, { ...warm.env, ...via() });
    const c = await loop(warm, 'cost-agent');
    tc.diagnostic(
      `writes ${c.writes} (${c.writesByAgent} by the agent), requests ${c.requests}, uploads ${c.uploads}: ${c.names.join(' ')}`,
    );
    assert.ok(c.writes <= PUSHES + 2, `${c.writes} record writes`);
    // Each push's write reached the PDS on the agent's own connections, not the helper's.
    assert.ok(
      c.writesByAgent >= PUSHES,
      `${c.writesByAgent} of ${c.writes} record writes came from the agent`,
    );
    // The agent answers git from its view of the table and writes it swapped on the CID that view
    // holds: one request a push (performance.md, "push to a ref table through the warm agent").
    assert.ok(c.requests <= PUSHES + 6, `${c.requests} requests`);
    assert.equal(c.uploads, 0);
    await logarithmic('cost-agent');
    await roundTrips(warm, 'cost-agent', c.dir);
  });

  it('keeps a big pack referenced as it is while the small pushes after it fold, uploading nothing', async () => {
    assert.equal((await plain.knotless('repo', 'create', 'cost-big')).code, 0);
    const dir = await newRepo(plain, 'knotless://alice.test/cost-big');
    await commitFiles(plain, dir, { 'big.bin': crypto.randomBytes(40_000) }, 'big');
    proxy!.reset();
    await plain.ok(dir, 'push', '-q', 'origin', 'main');
    // Its commit and tree in a small pack that travels in the record, its blob in one stored in a blob:
    // the one upload of the push.
    const [structure, big] = await packsOf('cost-big', 'refs/heads/main');
    assert.equal(structure?.holds, 'structure');
    assert.ok(structure.parts === undefined, 'the structure pack travels inline');
    assert.equal(big?.holds, 'blobs');
    assert.ok(big.parts !== undefined, 'the blob pack is stored in a blob');
    const first = proxy!.requests.map((r) => r.nsid ?? r.path);
    assert.equal(first.filter((n) => n === 'com.atproto.repo.uploadBlob').length, 1);
    proxy!.reset();
    for (let i = 0; i < 8; i++) {
      await commitFiles(plain, dir, { 'notes.txt': `line ${i}\n`.repeat(i + 1) }, `small ${i}`);
      await plain.ok(dir, 'push', '-q', 'origin', 'main');
    }
    await compactionsDone(plain);
    const names = proxy!.requests.map((r) => r.nsid ?? r.path);
    assert.equal(names.filter((n) => n === 'com.atproto.repo.uploadBlob').length, 0);
    assert.equal(names.filter((n) => n === 'com.atproto.repo.putRecord').length, 8);
    const packs = await packsOf('cost-big', 'refs/heads/main');
    assert.deepEqual(packs.slice(0, 2), [structure, big], 'the first two packs are listed as they were');
    assert.ok(packs.length <= 4, `${packs.length} packs after 9 pushes`);
    await roundTrips(plain, 'cost-big', dir);
  });

  it('counts the background compaction when one runs: seven big pushes cost eight record writes', async () => {
    assert.equal((await plain.knotless('repo', 'create', 'cost-piled')).code, 0);
    const dir = await newRepo(plain, 'knotless://alice.test/cost-piled');
    proxy!.reset();
    // 20 KB that does not compress: each push is a blob pack, which pushes never fold; the seventh
    // leaves the list past twice logarithmic, and its helper starts a compaction.
    for (let i = 0; i < 7; i++) {
      await commitFiles(plain, dir, { [`b${i}.bin`]: crypto.randomBytes(20_000) }, `b${i}`);
      await plain.ok(dir, 'push', '-q', 'origin', 'main');
    }
    assert.equal(await compactionsDone(plain), 1);
    const names = proxy!.requests.map((r) => r.nsid ?? r.path);
    const writes = names.filter((n) => WRITES.has(n)).length;
    // Seven pushes (the first also names HEAD, in the same applyWrites), then the compaction's one.
    assert.equal(writes, 8, names.join(' '));
    assert.ok(names.includes('com.atproto.repo.getRecord'), 'the compaction read the record');
    assert.ok((await packsOf('cost-piled', 'refs/heads/main')).length <= 4);
    await roundTrips(plain, 'cost-piled', dir);
  });
});
