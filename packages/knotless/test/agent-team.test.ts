// The warm agent and a team repository (format.md, "Teams"): the agent's view of a repository whose
// owner's table names maintainers holds every writer's verified table, each kept from its own
// account's checked event stream (the maintainer's on the network's second PDS). A warm push is then
// one write of the pusher's own table, swapped on the view's CID, and the reads of every other
// writer's table after it (format.md says why those reads are needed): two requests here, in two
// round trips, both carried by the agent. Two agents racing divergent pushes never both say ok; a
// maintainer removed while the agent holds the view is out of it at once; a maintainer's commit
// whose signature was altered drops the view.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeAll, encode } from '@atproto/lex-cbor';
import { CID } from 'multiformats/cid';
import { create as createDigest } from 'multiformats/hashes/digest';
import { varint } from 'multiformats';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, startGate, type Gate, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test', 'bob.test'], { pdses: 2 });
let proxy: Proxy;
let gate: Gate;
let agentA: RunningAgent | undefined;
let agentB: RunningAgent | undefined;
let sockA = '';
let sockB = '';
const through = (sock: () => string) => () =>
  sock() === ''
    ? { KNOTLESS_COMPACT: '0' }
    : { KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: proxy.url, KNOTLESS_AGENT_SOCKET: sock() };
// Alice (the owner) and bob (a maintainer, on the other PDS), each with a warm agent of their own.
const alice = useGitUser(
  t,
  'alice.test',
  through(() => sockA),
);
const bob = useGitUser(
  t,
  'bob.test',
  through(() => sockB),
);
// Other machines of the same accounts: their own caches, no agent, straight to the PDSes.
const aliceCold = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0' }));
const bobCold = useGitUser(t, 'bob.test', () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0' }));
const did = (h: string) => t.dids[h]!;

type Body = Record<string, unknown> & { ops: Array<Record<string, unknown>> };
/** Armed: the next commit of bob's that changes a ref table reaches the agents' streams with its signature altered. */
let forging = false;
let forged = 0;

before(async () => {
  // The users' logins are root hooks too, running beside this one: their cache files and
  // environments are read below.
  await Promise.all([alice.ready, bob.ready]);
  assert.notEqual(t.pdsOf['alice.test'], t.pdsOf['bob.test']);
  // Bob's PDS's event stream passes through a relay that can forge one of his commits.
  gate = await startGate(t.pdsOf['bob.test']!, alter);
  // One proxy before both PDSes (bob's requests routed to his), telling the agents' requests apart.
  proxy = await startProxy({
    target: t.pdsOf['alice.test']!,
    routes: { [did('bob.test')]: t.pdsOf['bob.test']! },
    watchPids: () => [agentA, agentB].flatMap((a) => (a === undefined ? [] : [a.child.pid!])),
  });
  // Alice's agent sees bob's PDS through the relay: her identity cache names it as his PDS.
  assert.equal((await alice.knotless('repo', 'list', 'bob.test')).code, 0);
  pointAtGate();
  const a = path.join(t.tmpdir(), 'a.sock');
  agentA = await spawnAgent(a, { ...alice.env, KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: proxy.url });
  sockA = a;
  const b = path.join(t.tmpdir(), 'b.sock');
  agentB = await spawnAgent(b, { ...bob.env, KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: proxy.url });
  sockB = b;
});
after(async () => {
  await proxy?.close();
  await gate?.close();
});

let nudges = 0;
/**
 * A record written in each account, so that each PDS's event stream carries a message: a stream is
 * taken as live only once one arrives (agent/stream.ts), and the dev network's PDSes are quiet.
 */
async function nudge(): Promise<void> {
  const n = ++nudges;
  await Promise.all(
    ['alice.test', 'bob.test'].map((h) => tableHands(t, h).put('dev.knotless.nudge', 'n', { n })),
  );
}

/** Points alice's identity cache at the relay as bob's PDS. */
function pointAtGate(): void {
  const file = path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'identity.json');
  const cache = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    dids: Record<string, { value: { pds: string } }>;
  };
  cache.dids[did('bob.test')]!.value.pds = gate.url;
  fs.writeFileSync(file, JSON.stringify(cache));
}

/** The relay's rewrite of one event of bob's PDS: when armed, a table commit's signature altered. */
function alter(payload: Buffer): Buffer {
  const [header, body] = [...decodeAll(payload)] as [Record<string, unknown>, Body];
  if (!forging || header['t'] !== '#commit' || body.repo !== did('bob.test')) return payload;
  if (!body.ops.some((o) => String(o['path']).startsWith('dev.knotless.refs/'))) return payload;
  forging = false;
  forged++;
  const car = readCar(body['blocks'] as Uint8Array);
  const commitBlock = car.blocks.find(([cid]) => cid.equals(car.root))![1];
  const commit = [...decodeAll(commitBlock)][0] as { sig: Uint8Array };
  const sig = Uint8Array.from(commit.sig);
  sig[10] = sig[10]! ^ 1;
  const bytes = encode({ ...commit, sig } as never);
  const root = CID.createV1(0x71, createDigest(0x12, crypto.createHash('sha256').update(bytes).digest()));
  const blocks = car.blocks.map(([cid, data]): [CID, Uint8Array] =>
    cid.equals(car.root) ? [root, bytes] : [cid, data],
  );
  return Buffer.concat([
    encode(header as never),
    encode({ ...body, commit: root, blocks: writeCar(root, blocks) } as never),
  ]);
}

function readCar(buf: Uint8Array): { root: CID; blocks: Array<[CID, Uint8Array]> } {
  const [headerLength, a] = varint.decode(buf);
  const header = [...decodeAll(buf.subarray(a, a + headerLength))][0] as { roots: unknown[] };
  const blocks: Array<[CID, Uint8Array]> = [];
  for (let at = a + headerLength; at < buf.length;) {
    const [length, read] = varint.decode(buf, at);
    const [cid, data] = CID.decodeFirst(buf.subarray(at + read, at + read + length));
    blocks.push([cid, data]);
    at += read + length;
  }
  return { root: CID.asCID(header.roots[0])!, blocks };
}

function writeCar(root: CID, blocks: Array<[CID, Uint8Array]>): Uint8Array {
  const parts: Uint8Array[] = [];
  const header = encode({ version: 1, roots: [root] } as never);
  parts.push(varint.encodeTo(header.length, new Uint8Array(varint.encodingLength(header.length))), header);
  for (const [cid, data] of blocks) {
    const length = cid.bytes.length + data.length;
    parts.push(varint.encodeTo(length, new Uint8Array(varint.encodingLength(length))), cid.bytes, data);
  }
  return Buffer.concat(parts);
}

interface WireTableOf {
  cid: string;
  value: { refs: Array<{ ref: string; target?: string }>; maintainers?: Array<{ did: string }> };
}
interface TeamView {
  table: WireTableOf;
  members?: Array<{ did: string; pds: string; table: WireTableOf | null }>;
}

/** The agent's view of alice's `name` as it answers /view (asking starts its load), or null. */
function teamView(sock: string, name: string): Promise<TeamView | null> {
  const q = new URLSearchParams({ did: did('alice.test'), repo: name, pds: t.pdsOf['alice.test']! });
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath: sock, path: `/view?${q.toString()}` }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => {
          const body = JSON.parse(text) as { confirmed: boolean } & Partial<TeamView>;
          resolve(body.confirmed && body.table !== undefined ? (body as TeamView) : null);
        });
      })
      .on('error', reject);
  });
}

const mainOf = (table: WireTableOf | null | undefined) =>
  table?.value.refs.find((r) => r.ref === 'refs/heads/main')?.target;

/** Waits (bounded) until the agent's view of `name` satisfies `ok`. */
async function viewUntil(
  agent: () => RunningAgent,
  sock: string,
  name: string,
  ok: (v: TeamView) => boolean,
): Promise<TeamView> {
  let view: TeamView | null = null;
  for (let i = 0; i < 600; i++) {
    view = await teamView(sock, name);
    if (view !== null && ok(view)) return view;
    // No view yet: its streams may wait for a first message.
    if (view === null && i % 20 === 0) await nudge();
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `the agent's view of ${name} never came: ${JSON.stringify(view)}\n${agent().log().slice(-3000)}`,
  );
}

/** The view of a team whose main is at `main` in the owner's or bob's table, bob its one maintainer. */
const teamAt = (main: string) => (v: TeamView) =>
  v.members?.length === 1 &&
  v.members[0]!.did === did('bob.test') &&
  (mainOf(v.table) === main || mainOf(v.members[0]!.table) === main);

/** Alice's repository `name` on a ref table, main at a first commit, bob its maintainer. */
async function teamRepo(name: string): Promise<{ url: string; first: string }> {
  assert.equal((await aliceCold.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(aliceCold, url);
  const first = await commitFiles(aliceCold, dir, { 'a.txt': 'first\n' }, 'first');
  const push = await aliceCold.git(dir, 'push', '-q', 'origin', 'main');
  assert.equal(push.code, 0, push.stderr);
  const migrate = await aliceCold.knotless('repo', 'migrate', name);
  assert.equal(migrate.code, 0, migrate.stderr);
  const add = await aliceCold.knotless('repo', 'maintainer', 'add', name, 'bob.test');
  assert.equal(add.code, 0, add.stderr);
  return { url, first };
}

/** A clone of `url` by `user`, main checked out. */
async function clone(user: GitUser, url: string): Promise<string> {
  const dir = user.dir();
  await user.ok(dir, 'clone', '-q', url, 'w');
  return `${dir}/w`;
}

/** main as a cold reader (no agent) lists it, and every ref listed. */
async function coldList(url: string): Promise<Map<string, string>> {
  return lsRemote(await aliceCold.ok(aliceCold.dir(), 'ls-remote', url));
}

describe('the warm agent and a team repository', () => {
  // Before the network's own `after`: the PDS waits for open event streams when it closes.
  after(async () => {
    await agentA?.stop();
    await agentB?.stop();
  });

  it("pushes a maintainer's and the owner's commits in one write and one read each, carried by the agents", async () => {
    const { url, first } = await teamRepo('counted');
    await viewUntil(() => agentB!, sockB, 'counted', teamAt(first));
    const bw = await clone(bob, url);
    let last = first;
    for (const n of [1, 2]) {
      const oid = await commitFiles(bob, bw, { 'b.txt': `bob ${n}\n` }, `bob ${n}`);
      proxy.reset();
      const res = await bob.git(bw, 'push', 'origin', 'main');
      assert.equal(res.code, 0, res.stderr);
      const why = `bob's push ${n}: ${JSON.stringify(proxy.requests)}\n${agentB!.log().slice(-2000)}`;
      // His own table written (swapped on the view's CID), then the owner's table read with its proof.
      assert.deepEqual(
        proxy.requests.map((r) => r.nsid),
        ['com.atproto.repo.putRecord', 'com.atproto.sync.getRecord'],
        why,
      );
      for (const r of proxy.requests)
        assert.equal(r.pid, agentB!.child.pid, `not carried by the agent: ${why}`);
      assert.doesNotMatch(res.stderr, /warning/);
      assert.equal((await coldList(url)).get('refs/heads/main'), oid);
      last = oid;
      // The view took his write at once: his next push swaps on it.
      const view = await teamView(sockB, 'counted');
      assert.equal(mainOf(view?.members?.[0]?.table), oid, agentB!.log().slice(-2000));
    }

    // Alice's agent follows bob's account: her view shows his push, and her push on top of it is one
    // write of her table and one read of his.
    await viewUntil(
      () => agentA!,
      sockA,
      'counted',
      (v) => mainOf(v.members?.[0]?.table) === last,
    );
    const aw = await clone(alice, url);
    assert.equal((await alice.ok(aw, 'rev-parse', 'HEAD')).trim(), last);
    const hers = await commitFiles(alice, aw, { 'a.txt': 'alice\n' }, 'alice');
    proxy.reset();
    const res = await alice.git(aw, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    const why = `alice's push: ${JSON.stringify(proxy.requests)}\n${agentA!.log().slice(-2000)}`;
    assert.deepEqual(
      proxy.requests.map((r) => r.nsid),
      ['com.atproto.repo.putRecord', 'com.atproto.sync.getRecord'],
      why,
    );
    for (const r of proxy.requests)
      assert.equal(r.pid, agentA!.child.pid, `not carried by the agent: ${why}`);
    const ls = await coldList(url);
    assert.equal(ls.get('refs/heads/main'), hers);
    assert.ok(![...ls.keys()].some((r) => r.startsWith('refs/maintainers/')), JSON.stringify([...ls]));
  });

  it('never says ok to both of two agents racing divergent pushes', async () => {
    const { url, first } = await teamRepo('raced');
    await viewUntil(() => agentA!, sockA, 'raced', teamAt(first));
    await viewUntil(() => agentB!, sockB, 'raced', teamAt(first));
    const aw = await clone(alice, url);
    const bw = await clone(bob, url);
    const ours = await commitFiles(alice, aw, { 'a.txt': 'alice races\n' }, 'alice races');
    const theirs = await commitFiles(bob, bw, { 'b.txt': 'bob races\n' }, 'bob races');
    proxy.reset();
    // Both writes are held at the proxy until both have been sent: each lands before the other's read.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    proxy.inject({ nsid: 'com.atproto.repo.putRecord', times: 2, fault: { kind: 'hold', until: held } });
    const running = [alice.git(aw, 'push', 'origin', 'main'), bob.git(bw, 'push', 'origin', 'main')];
    let both = false;
    for (let i = 0; i < 600 && !both; i++) {
      both = proxy.requests.filter((r) => r.nsid === 'com.atproto.repo.putRecord').length >= 2;
      if (!both) await new Promise((r) => setTimeout(r, 100));
    }
    release();
    const [ra, rb] = await Promise.all(running);
    proxy.clearFaults();
    const log = `${ra!.stderr}\n${rb!.stderr}\n${agentA!.log().slice(-1500)}\n${agentB!.log().slice(-1500)}`;
    assert.ok(both, `the two writes were never sent together\n${log}`);
    assert.ok(ra!.code !== 0 || rb!.code !== 0, `both divergent pushes were acknowledged\n${log}`);
    for (const r of [ra!, rb!])
      if (r.code !== 0) assert.match(r.stderr, /\[rejected\] +main -> main \(fetch first\)/, log);
    // Every request of each push was its agent's.
    for (const r of proxy.requests)
      assert.ok(r.pid === agentA!.child.pid || r.pid === agentB!.child.pid, JSON.stringify(r));
    // What was acknowledged is the repository's main; nothing refused is left as its value.
    const main = (await coldList(url)).get('refs/heads/main');
    if (ra!.code === 0) assert.equal(main, ours);
    else if (rb!.code === 0) assert.equal(main, theirs);
    else assert.equal(main, first);
  });

  it('takes a maintainer out of its view when the owner removes them, and refuses their next push', async () => {
    const { url, first } = await teamRepo('removed');
    await viewUntil(() => agentB!, sockB, 'removed', teamAt(first));
    const bw = await clone(bob, url);
    const mine = await commitFiles(bob, bw, { 'b.txt': 'before\n' }, 'before');
    await bob.ok(bw, 'push', '-q', 'origin', 'main');
    const rm = await aliceCold.knotless('repo', 'maintainer', 'remove', 'removed', 'bob.test');
    assert.equal(rm.code, 0, rm.stderr);
    // The owner's table, from the stream: bob's table is out of the view, which stays (no maintainers).
    const view = await viewUntil(
      () => agentB!,
      sockB,
      'removed',
      (v) => v.members === undefined,
    );
    assert.equal(mainOf(view.table), mine);
    await commitFiles(bob, bw, { 'b.txt': 'after\n' }, 'after');
    proxy.reset();
    const res = await bob.git(bw, 'push', 'origin', 'main');
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /only alice\.test can push/);
    assert.equal(proxy.count('com.atproto.repo.putRecord'), 0, JSON.stringify(proxy.requests));
    assert.equal((await coldList(url)).get('refs/heads/main'), mine);
  });

  it("drops its view when a maintainer's commit reaches it with its signature altered", async () => {
    const { url, first } = await teamRepo('forged');
    pointAtGate();
    await viewUntil(() => agentA!, sockA, 'forged', teamAt(first));
    const bw = await clone(bobCold, url);
    const oid = await commitFiles(bobCold, bw, { 'b.txt': 'forged\n' }, 'forged');
    forging = true;
    const before = forged;
    await bobCold.ok(bw, 'push', '-q', 'origin', 'main');
    while (forged === before) await new Promise((r) => setTimeout(r, 100));
    const line = new RegExp(
      `dropped the view of ${did('alice.test')}/forged: an event could not be applied \\(`,
    );
    while (!line.test(agentA!.log())) await new Promise((r) => setTimeout(r, 100));
    // Nothing of the forged commit was taken; the next request loads the view afresh, read with
    // proofs and carried by the agent, and it holds bob's push.
    const seen = await teamView(sockA, 'forged');
    assert.notEqual(mainOf(seen?.members?.[0]?.table), oid, 'the forged table was taken');
    proxy.reset();
    pointAtGate();
    await viewUntil(
      () => agentA!,
      sockA,
      'forged',
      (v) => mainOf(v.members?.[0]?.table) === oid,
    );
    assert.ok(proxy.count('com.atproto.sync.getRecord') >= 2, JSON.stringify(proxy.requests));
    for (const r of proxy.requests) assert.equal(r.pid, agentA!.child.pid, JSON.stringify(r));
    assert.equal((await coldList(url)).get('refs/heads/main'), oid);
  });
});
