// The warm agent keeps a view of a repository whose refs are in a ref table (format.md, "A push is
// one write"): loaded from the verified table, kept current from the account's checked event stream,
// and taking the agent's own table writes at once. A push through the agent is then one putRecord of
// the table, swapped on the view's CID; concurrent pushes of this machine fold into one write of the
// table; a push from another machine racing it is kept, or its rival is told to fetch first.
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import type { RefUpdate } from 'knotless-core/records/ref-table';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test']);
let proxy: Proxy;
let socket = '';
let agent: RunningAgent;
// Repositories start on ref records (KNOTLESS_REF_TABLE=0): the tables here are written by hand from
// them, as a migration would.
// Logged in before the proxy and the agent start (the hooks run in order), directly.
const warm = useGitUser(t, 'alice.test', () =>
  socket === ''
    ? { KNOTLESS_REF_TABLE: '0' }
    : {
        KNOTLESS_REF_TABLE: '0',
        KNOTLESS_COMPACT: '0',
        KNOTLESS_SERVICE: proxy.url,
        KNOTLESS_AGENT_SOCKET: socket,
      },
);
// Another machine of the same account: its own cache, no agent, straight to the PDS.
const other = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_AGENT: '0',
  KNOTLESS_COMPACT: '0',
}));
const did = () => t.dids['alice.test']!;
const { refRecords, writeTable, readTable } = tableHands(t, 'alice.test');

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => [agent.child.pid!] });
  const at = path.join(t.tmpdir(), 'agent.sock');
  agent = await spawnAgent(at, { ...t.env(), KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: proxy.url });
  socket = at;
});

/** Calls the agent's socket (GET); the answer's JSON. */
function ask(p: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath: socket, path: p }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(JSON.parse(text)));
      })
      .on('error', reject);
  });
}

interface TableAnswer {
  cid: string;
  value: { refs: Array<{ ref: string; target?: string }> };
}

/** The agent's view of alice's `name` when it is a view of its table, else null. */
async function tableView(name: string): Promise<TableAnswer | null> {
  const q = new URLSearchParams({ did: did(), repo: name, pds: t.net.pdsUrl });
  const body = (await ask(`/view?${q.toString()}`)) as { confirmed: boolean; table?: TableAnswer };
  return body.confirmed && body.table !== undefined ? body.table : null;
}

/** Waits (bounded) until the agent's view of `name` is its table with each of `refs` at its value. */
async function viewHas(name: string, refs: Record<string, string>): Promise<TableAnswer> {
  let view: TableAnswer | null = null;
  for (let i = 0; i < 300; i++) {
    view = await tableView(name);
    const at = new Map((view?.value.refs ?? []).map((r) => [r.ref, r.target]));
    if (view !== null && Object.entries(refs).every(([r, oid]) => at.get(r) === oid)) return view;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(
    `the agent's view of ${name} never showed ${JSON.stringify(refs)}: ${JSON.stringify(view)}\n${agent.log()}`,
  );
}

/** Table writes unanswered in the agent for alice (waiting, or in the write under way). */
async function pending(): Promise<number> {
  return ((await ask('/writes')) as Record<string, number>)[did()] ?? 0;
}

/** Waits (bounded) until `n` writes of alice wait in the agent; false if they never did. */
async function reach(n: number): Promise<boolean> {
  for (let i = 0; i < 600; i++) {
    if ((await pending()) >= n) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/**
 * A repository on a ref table, made by the other machine: main (and each of `branches`) at a first
 * commit, pushed as records and then moved into a table; the agent's view of it is the table.
 */
async function tabled(
  name: string,
  branches: string[] = [],
): Promise<{ url: string; dir: string; first: string }> {
  assert.equal((await other.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const odir = await newRepo(other, url);
  const first = await commitFiles(other, odir, { 'a.txt': 'first\n' }, 'first');
  await other.ok(odir, 'push', '-q', 'origin', 'main');
  const main = (await refRecords(name)).get('refs/heads/main')!;
  const updates: RefUpdate[] = ['main', ...branches].map((b) => ({
    ref: `refs/heads/${b}`,
    target: first,
    packs: main.packs,
  }));
  // The agent starts to follow the account; the table's write makes its event stream live.
  assert.equal(await tableView(name), null);
  await writeTable(name, updates);
  const dir = warm.dir();
  await warm.ok(dir, 'clone', '-q', url, 'w');
  const refs = Object.fromEntries(['main', ...branches].map((b) => [`refs/heads/${b}`, first]));
  await viewHas(name, refs);
  return { url, dir: `${dir}/w`, first };
}

/** A commit on `from` in `dir`, left on branch `name` (the work tree returns to main). */
async function branchCommit(dir: string, name: string, from: string, file: string): Promise<string> {
  await warm.ok(dir, 'checkout', '-q', '-b', name, from);
  const oid = await commitFiles(warm, dir, { [file]: `${name}\n` }, name);
  await warm.ok(dir, 'checkout', '-q', 'main');
  return oid;
}

/** Writes of a table: no ref record or part is written in these cases, so every putRecord is one. */
const tableWrites = () => proxy.count('com.atproto.repo.putRecord');

describe('the warm agent and a ref table', () => {
  after(async () => {
    await agent.stop();
    await proxy.close();
  });

  it('pushes in one request, carried by the agent, and takes its own write into its view at once', async () => {
    const { url, dir } = await tabled('warm-one');
    for (const n of [1, 2]) {
      const oid = await commitFiles(warm, dir, { 'a.txt': `warm ${n}\n` }, `warm ${n}`);
      proxy.reset();
      const res = await warm.git(dir, 'push', 'origin', 'main');
      assert.equal(res.code, 0, res.stderr);
      const why = `push ${n}: ${JSON.stringify(proxy.requests)}\n${agent.log().slice(-2000)}`;
      assert.deepEqual(
        proxy.requests.map((r) => r.nsid),
        ['com.atproto.repo.putRecord'],
        why,
      );
      assert.equal(proxy.requests[0]!.pid, agent.child.pid, `not carried by the agent: ${why}`);
      assert.doesNotMatch(res.stderr, /warning/);
      const stored = (await readTable('warm-one'))!;
      assert.equal(stored.value.refs.find((r) => r.ref === 'refs/heads/main')?.target, oid);
      // The view holds the write at once: the next push swaps on this very CID.
      const view = await tableView('warm-one');
      assert.equal(view?.cid, stored.cid, `${n}: ${agent.log().slice(-2000)}`);
    }
    const ls = lsRemote(await other.ok(other.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/main'), (await warm.ok(dir, 'rev-parse', 'HEAD')).trim());
  });

  it('folds concurrent pushes into fewer table writes than pushes; a refused ref is refused to its own push', async () => {
    const names = ['n1', 'n2', 'n3', 'n4'];
    const { url, dir, first } = await tabled('fold', ['x', ...names]);
    const p1 = await branchCommit(dir, 'p1', first, 'p1.txt');
    const p2 = await branchCommit(dir, 'p2', first, 'p2.txt');
    const want = new Map<string, string>();
    for (const n of names) want.set(n, await branchCommit(dir, `${n}-next`, first, `${n}.txt`));
    const pushes = [
      () => warm.git(dir, 'push', url, 'p1:x'),
      () => warm.git(dir, 'push', url, 'p2:x'),
      ...names.map((n) => () => warm.git(dir, 'push', url, `${n}-next:${n}`)),
    ];
    proxy.reset();
    // The first push's write is held at the PDS until every other push's write waits in the agent.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    proxy.inject({ method: 'POST', fault: { kind: 'hold', until: held } });
    const running = [pushes[0]!()];
    let reached = await reach(1);
    if (reached) {
      running.push(...pushes.slice(1).map((p) => p()));
      reached = await reach(pushes.length);
    }
    release();
    const [r1, r2, ...rest] = await Promise.all(running);
    proxy.clearFaults();
    const log = agent.log().slice(-3000);
    assert.ok(reached, `the writes never waited in the agent together\n${log}`);
    const writes = tableWrites();
    assert.ok(writes < pushes.length, `${writes} table writes for ${pushes.length} pushes\n${log}`);
    assert.equal(proxy.count('com.atproto.repo.applyWrites'), 0);
    assert.match(
      agent.log(),
      /group commit: [2-9] pushes to did:plc:\S+\/fold in one write of its ref table/,
    );
    // p1's write landed first; p2 decided on x at `first` too, was told its swap failed, read again
    // and found x at p1, which p2 does not descend from: refused to p2 alone.
    assert.equal(r1!.code, 0, r1!.stderr);
    assert.notEqual(r2!.code, 0, r2!.stderr);
    assert.match(r2!.stderr, /\[rejected\] +p2 -> x \((non-fast-forward|fetch first)\)/);
    rest.forEach((r, i) => assert.equal(r.code, 0, `push of ${names[i]}: ${r.stderr}`));
    // Every push acknowledged is in the table.
    const table = (await readTable('fold'))!.value;
    const at = new Map(table.refs.map((r) => [r.ref, r.target]));
    assert.equal(at.get('refs/heads/x'), p1);
    assert.notEqual(at.get('refs/heads/x'), p2);
    for (const n of names) assert.equal(at.get(`refs/heads/${n}`), want.get(n), n);
    const ls = lsRemote(await other.ok(other.dir(), 'ls-remote', url));
    for (const n of names) assert.equal(ls.get(`refs/heads/${n}`), want.get(n), n);
  });

  it("keeps both of two racing pushes to different branches, one of them another machine's", async () => {
    const { url, dir } = await tabled('race', ['o']);
    const odir = other.dir();
    await other.ok(odir, 'clone', '-q', url, 'o');
    await other.ok(`${odir}/o`, 'checkout', '-q', 'o');
    const theirs = await commitFiles(other, `${odir}/o`, { 'o.txt': 'other\n' }, 'other');
    const ours = await commitFiles(warm, dir, { 'w.txt': 'warm\n' }, 'warm');
    proxy.reset();
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    proxy.inject({ method: 'POST', fault: { kind: 'hold', until: held } });
    const running = warm.git(dir, 'push', 'origin', 'main');
    assert.ok(await reach(1), agent.log());
    // The other machine's push lands while the agent's write is held: the table moved under it.
    await other.ok(`${odir}/o`, 'push', '-q', 'origin', 'o');
    release();
    const res = await running;
    proxy.clearFaults();
    assert.equal(res.code, 0, `${res.stderr}\n${agent.log().slice(-2000)}`);
    const ls = lsRemote(await other.ok(other.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/main'), ours);
    assert.equal(ls.get('refs/heads/o'), theirs);
    // Refused once on the moved table, read again (verified), written again: every request the agent's.
    assert.equal(tableWrites(), 2, JSON.stringify(proxy.requests));
    // What git was shown is checked against the table read again: no read more before it exits.
    assert.equal(proxy.count('com.atproto.sync.getRecord'), 1, JSON.stringify(proxy.requests));
    assert.equal(proxy.requests.length, 3, JSON.stringify(proxy.requests));
    for (const r of proxy.requests) assert.equal(r.pid, agent.child.pid, JSON.stringify(r));
  });

  it('tells the agent\'s push to one branch "fetch first" when another machine moved it, and loses no ack', async () => {
    const { url, dir } = await tabled('race-main');
    const odir = other.dir();
    await other.ok(odir, 'clone', '-q', url, 'o');
    const theirs = await commitFiles(other, `${odir}/o`, { 'o.txt': 'other\n' }, 'other');
    await commitFiles(warm, dir, { 'w.txt': 'warm\n' }, 'warm');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    proxy.inject({ method: 'POST', fault: { kind: 'hold', until: held } });
    const running = warm.git(dir, 'push', 'origin', 'main');
    assert.ok(await reach(1), agent.log());
    await other.ok(`${odir}/o`, 'push', '-q', 'origin', 'main');
    release();
    const res = await running;
    proxy.clearFaults();
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /\[rejected\] +main -> main \(fetch first\)/);
    assert.equal(lsRemote(await other.ok(other.dir(), 'ls-remote', url)).get('refs/heads/main'), theirs);
    // After a pull, the agent's push lands.
    await warm.ok(dir, 'pull', '-q', '--no-rebase', '--no-edit', 'origin', 'main');
    const merged = (await warm.ok(dir, 'rev-parse', 'HEAD')).trim();
    await warm.ok(dir, 'push', '-q', 'origin', 'main');
    assert.equal(lsRemote(await other.ok(other.dir(), 'ls-remote', url)).get('refs/heads/main'), merged);
  });
});
