// Group commit through the warm agent (issue 18): ref writes of one account that reach the agent
// while a commit is under way go to the PDS as one applyWrites commit, and each push is still
// decided with git's own rules. Every case holds the first write at the PDS until the others wait in
// the agent (asked over its socket), so that they share a commit by construction, not by timing.
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);
let proxy: Proxy;
let socket = '';
let agent: RunningAgent;
// Logged in before the proxy and the agent start (the hooks run in order), directly.
const alice = useGitUser(t, 'alice.test', () =>
  socket === '' ? {} : { KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: proxy.url, KNOTLESS_AGENT_SOCKET: socket },
);

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
  const at = path.join(t.tmpdir(), 'agent.sock');
  agent = await spawnAgent(at, {
    ...t.env(),
    KNOTLESS_COMPACT: '0',
    KNOTLESS_SERVICE: proxy.url,
  });
  socket = at;
});

/** Requests that make a commit in the account. */
const COMMITS = [
  'com.atproto.repo.putRecord',
  'com.atproto.repo.deleteRecord',
  'com.atproto.repo.createRecord',
  'com.atproto.repo.applyWrites',
];
const commits = () => COMMITS.reduce((n, nsid) => n + proxy.count(nsid), 0);

/** Ref writes the agent holds for alice's account, unanswered (waiting, or in the commit under way). */
async function pending(): Promise<number> {
  const body = await new Promise<string>((resolve, reject) => {
    http
      .get({ socketPath: socket, path: '/writes' }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
  return (JSON.parse(body) as Record<string, number>)[t.dids['alice.test']!] ?? 0;
}

/**
 * Runs `pushes` at once, each writing one ref, with the first commit that reaches the PDS held there
 * until every push's write has reached the agent; returns each push's result.
 */
async function together<T>(pushes: Array<() => Promise<T>>): Promise<T[]> {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  proxy.inject({ method: 'POST', fault: { kind: 'hold', until: held } });
  const running = pushes.map((p) => p());
  const deadline = Date.now() + 60_000;
  let reached: number;
  while ((reached = await pending()) < pushes.length && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 100));
  release();
  const results = await Promise.all(running);
  if (reached < pushes.length)
    throw new Error(`only ${reached} writes reached the agent together: ${JSON.stringify(results)}`);
  return results;
}

const tip = async (url: string, ref: string) =>
  (await alice.ok(alice.dir(), 'ls-remote', url, ref)).split('\t')[0] ?? '';

/** A repository with `main` (two commits: base, then top) and each of `branches` at top. */
async function seeded(name: string, branches: string[]) {
  assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(alice, url);
  const base = await commitFiles(alice, dir, { 'a.txt': 'base\n' }, 'base');
  const top = await commitFiles(alice, dir, { 'a.txt': 'top\n' }, 'top');
  for (const b of branches) await alice.ok(dir, 'branch', b);
  await alice.ok(dir, 'push', '-q', url, 'main', ...branches);
  return { url, dir, base, top };
}

/** A commit on `from` in `dir`, left on branch `name` (the work tree returns to main). */
async function branchCommit(dir: string, name: string, from: string, file: string): Promise<string> {
  await alice.ok(dir, 'checkout', '-q', '-b', name, from);
  const oid = await commitFiles(alice, dir, { [file]: `${name}\n` }, name);
  await alice.ok(dir, 'checkout', '-q', 'main');
  return oid;
}

describe('group commit through the agent', () => {
  // Here, not at the top: the file's network closes after its suites, and waits for the agent's stream.
  after(async () => {
    await agent.stop();
    await proxy.close();
  });

  it('lands parallel pushes of different branches in fewer commits than pushes, each acknowledged', async () => {
    const names = ['b1', 'b2', 'b3', 'b4', 'b5', 'b6'];
    const { url, dir, top } = await seeded('group', names);
    const want = new Map<string, string>();
    for (const b of names) want.set(b, await branchCommit(dir, `${b}-next`, top, `${b}.txt`));
    proxy.reset();
    const results = await together(names.map((b) => () => alice.git(dir, 'push', url, `${b}-next:${b}`)));
    const count = commits();
    proxy.clearFaults();
    results.forEach((r, i) => assert.equal(r.code, 0, `push of ${names[i]}: ${r.stderr}`));
    for (const b of names) assert.equal(await tip(url, `refs/heads/${b}`), want.get(b), b);
    // The held commit (the writes that came within its few milliseconds), then all the others in one.
    assert.ok(count <= 2, `${count} commits for ${names.length} pushes`);
    assert.ok(proxy.count('com.atproto.repo.applyWrites') >= 1);
    assert.match(agent.log(), /group commit: [2-6] ref writes of did:plc:\S+ in one commit/);
  });

  it("rejects a non-fast-forward push of the batch alone, with git's reason, and lands its neighbours", async () => {
    const { url, dir, top } = await seeded('group-nff', ['x', 'n1', 'n2', 'n3']);
    const b = await branchCommit(dir, 'p1', top, 'p1.txt');
    const c = await branchCommit(dir, 'p2', top, 'p2.txt');
    const next = new Map<string, string>();
    for (const n of ['n1', 'n2', 'n3']) next.set(n, await branchCommit(dir, `${n}-next`, top, `${n}.txt`));
    proxy.reset();
    const [r1, r2, ...rest] = await together([
      () => alice.git(dir, 'push', url, 'p1:x'),
      () => alice.git(dir, 'push', url, 'p2:x'),
      ...['n1', 'n2', 'n3'].map((n) => () => alice.git(dir, 'push', url, `${n}-next:${n}`)),
    ]);
    const count = commits();
    proxy.clearFaults();
    // Both saw x at `top` and both are fast-forwards of it; whichever came second is not one of the other.
    assert.ok((r1!.code === 0) !== (r2!.code === 0), `${r1!.stderr}\n${r2!.stderr}`);
    const [lost, won] = r1!.code === 0 ? [r2!, b] : [r1!, c];
    assert.match(lost.stderr, /\[rejected\] +p[12] -> x \(non-fast-forward\)/);
    assert.equal(await tip(url, 'refs/heads/x'), won);
    rest.forEach((r) => assert.equal(r.code, 0, r.stderr));
    for (const [n, oid] of next) assert.equal(await tip(url, `refs/heads/${n}`), oid, n);
    assert.ok(count < 5, `${count} commits for 5 pushes`);
  });

  it('keeps leases in a batch: a lease that holds lands, a lease overtaken in the batch is stale', async () => {
    const { url, dir, base, top } = await seeded('group-lease', ['x', 'y', 'n1']);
    const plain = await branchCommit(dir, 'plain', top, 'plain.txt');
    const leased = await branchCommit(dir, 'leased', base, 'leased.txt');
    const rewrite = await branchCommit(dir, 'rewrite', base, 'rewrite.txt');
    const n1 = await branchCommit(dir, 'n1-next', top, 'n1.txt');
    proxy.reset();
    const [rPlain, rLeased, rRewrite, rN1] = await together([
      () => alice.git(dir, 'push', url, 'plain:x'),
      () => alice.git(dir, 'push', `--force-with-lease=refs/heads/x:${top}`, url, '+leased:x'),
      () => alice.git(dir, 'push', `--force-with-lease=refs/heads/y:${top}`, url, '+rewrite:y'),
      () => alice.git(dir, 'push', url, 'n1-next:n1'),
    ]);
    proxy.clearFaults();
    // y's lease held (nothing else wrote y): the rewrite landed although it is no fast-forward.
    assert.equal(rRewrite!.code, 0, rRewrite!.stderr);
    assert.equal(await tip(url, 'refs/heads/y'), rewrite);
    assert.equal(rN1!.code, 0, rN1!.stderr);
    assert.equal(await tip(url, 'refs/heads/n1'), n1);
    // x: one of the two won. A lease overtaken is "stale info"; a plain push overtaken by the forced
    // rewrite is no fast-forward of it.
    assert.ok((rPlain!.code === 0) !== (rLeased!.code === 0), `${rPlain!.stderr}\n${rLeased!.stderr}`);
    if (rPlain!.code === 0) {
      assert.match(rLeased!.stderr, /\[rejected\] +leased -> x \(stale info\)/);
      assert.equal(await tip(url, 'refs/heads/x'), plain);
    } else {
      assert.match(rPlain!.stderr, /\[rejected\] +plain -> x \(non-fast-forward\)/);
      assert.equal(await tip(url, 'refs/heads/x'), leased);
    }
  });

  it('lets one of two clones pushing the same branch win; the other is told to fetch first', async () => {
    const { url } = await seeded('group-race', ['n1']);
    const clones: string[] = [];
    const mine: string[] = [];
    for (const who of ['one', 'two']) {
      const d = alice.dir();
      await alice.ok(d, 'clone', '-q', url, who);
      const dir = path.join(d, who);
      mine.push(await commitFiles(alice, dir, { [`${who}.txt`]: `${who}\n` }, who));
      clones.push(dir);
    }
    const n1 = await branchCommit(clones[0]!, 'n1-next', 'main~1', 'n1.txt');
    proxy.reset();
    const [one, two, r3] = await together([
      () => alice.git(clones[0]!, 'push', url, 'main'),
      () => alice.git(clones[1]!, 'push', url, 'main'),
      () => alice.git(clones[0]!, 'push', url, 'n1-next:n1'),
    ]);
    proxy.clearFaults();
    assert.ok((one!.code === 0) !== (two!.code === 0), `${one!.stderr}\n${two!.stderr}`);
    const [lost, won] = one!.code === 0 ? [two!, mine[0]] : [one!, mine[1]];
    assert.match(lost.stderr, /\[rejected\] +main -> main \(fetch first\)/);
    assert.equal(await tip(url, 'refs/heads/main'), won);
    assert.equal(r3!.code, 0, r3!.stderr);
    assert.equal(await tip(url, 'refs/heads/n1'), n1);
  });
});
