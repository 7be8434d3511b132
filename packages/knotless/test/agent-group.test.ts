// Group commit through the warm agent: ref writes of one account that reach the agent
// while a commit is under way go to the PDS as one applyWrites commit, and each push is still
// decided with git's own rules. Every case holds the first write at the PDS until the others wait in
// the agent (asked over its socket), so that they share a commit by construction, not by timing.
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type FaultRule, type Proxy } from 'knotless-devnet';
import { agentWireView, spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { waitUntil } from './helpers/wait.ts';

const t = useNetwork(['alice.test']);
let proxy: Proxy;
let socket = '';
let agent: RunningAgent;
// Logged in before the proxy and the agent start (the hooks run in order), directly. Its repositories
// stay on ref records (KNOTLESS_REF_TABLE=0): the group commit folds ref-record writes of several
// pushes into one applyWrites, which is what these cases hold and count.
const alice = useGitUser(t, 'alice.test', () =>
  socket === ''
    ? { KNOTLESS_REF_TABLE: '0' }
    : {
        KNOTLESS_REF_TABLE: '0',
        KNOTLESS_COMPACT: '0',
        KNOTLESS_SERVICE: proxy.url,
        KNOTLESS_AGENT_SOCKET: socket,
      },
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

/** Waits until `n` ref writes of alice's are unanswered in the agent. */
async function reach(n: number): Promise<void> {
  await waitUntil(`${n} of alice's writes held in the agent`, async () =>
    (await pending()) >= n ? true : undefined,
  );
}

/**
 * Runs `pushes`, each writing one ref, so that they share commits by construction: the first
 * push's write goes alone (the agent sends a lone write as it came) and is held at the PDS until
 * every other push's write waits in the agent behind it; then `rule`, if any, is scripted at the PDS
 * and all go on. The first push's write lands first; the others go as one commit. Returns each result.
 */
async function together<T>(pushes: Array<() => Promise<T>>, rule?: FaultRule): Promise<T[]> {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  proxy.inject({ method: 'POST', fault: { kind: 'hold', until: held } });
  const running = [pushes[0]!()];
  await reach(1);
  running.push(...pushes.slice(1).map((p) => p()));
  await reach(pushes.length);
  if (rule !== undefined) proxy.inject(rule);
  release();
  return Promise.all(running);
}

/**
 * Waits until the agent holds a confirmed view of alice's repository `name` with each of
 * `refs` at `oid`: then every push of a case decides on that view and proves it with a swap on its
 * commit. Without it, a push that starts before the agent's event stream has delivered the seeding
 * commit lists for itself and swaps on no commit, and the batch after it meets a refused swap first
 * (a third commit request, correct but not what a case counts).
 */
async function viewCaughtUp(name: string, refs: string[], oid: string): Promise<void> {
  const q = { did: t.dids['alice.test']!, repo: name, pds: t.net.pdsUrl };
  await waitUntil(`the agent's view of ${name} to catch up`, async () => {
    const view = await agentWireView(socket, q);
    const at = new Map((view?.refs ?? []).map((r) => [r.record.ref, r.record.target]));
    return view !== null && refs.every((r) => at.get(`refs/heads/${r}`) === oid) ? true : undefined;
  });
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
  await viewCaughtUp(name, ['main', ...branches], top);
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
    // The first write alone, then the other five in one commit.
    const why = `${count} commit requests for ${names.length} pushes (${proxy.count('com.atproto.repo.applyWrites')} applyWrites); the agent's log:\n${agent.log().slice(-3000)}`;
    assert.equal(count, 2, why);
    assert.equal(proxy.count('com.atproto.repo.applyWrites'), 1);
    assert.match(agent.log(), /group commit: 5 ref writes of did:plc:\S+ in one commit/);
  });

  it('proves the next push on its view after a commit of several writes: one write, no refusal, no warning', async () => {
    const names = ['c1', 'c2', 'c3', 'c4'];
    const { url, dir, top } = await seeded('group-chain', names);
    for (const b of names) await branchCommit(dir, `${b}-next`, top, `${b}.txt`);
    const first = await together(names.map((b) => () => alice.git(dir, 'push', url, `${b}-next:${b}`)));
    proxy.clearFaults();
    first.forEach((r, i) => assert.equal(r.code, 0, `push of ${names[i]}: ${r.stderr}`));
    // The agent's commits so far: a write alone, then the others in one commit on the account state
    // it read. The next push's view is at that commit, and its write must prove it at once.
    const again = await branchCommit(dir, 'c1-again', 'c1-next', 'again.txt');
    proxy.reset();
    const res = await alice.git(dir, 'push', url, 'c1-again:c1');
    assert.equal(res.code, 0, res.stderr);
    assert.doesNotMatch(res.stderr, /changed while git was deciding/);
    const why = `the agent's log:\n${agent.log().slice(-3000)}`;
    assert.equal(commits(), 1, `${commits()} commit requests for one push; ${why}`);
    assert.equal(proxy.count('com.atproto.repo.listRecords'), 0, why);
    assert.equal(proxy.count('com.atproto.repo.getRecord'), 0, why);
    assert.equal(await tip(url, 'refs/heads/c1'), again);
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
    // Both saw x at `top` and checked a fast-forward of it. p1's write landed first; p2's came in
    // the batch still naming `top`, was refused alone, and p2 decided again: c is no descendant of b.
    assert.equal(r1!.code, 0, r1!.stderr);
    assert.notEqual(r2!.code, 0);
    assert.match(r2!.stderr, /\[rejected\] +p2 -> x \(non-fast-forward\)/);
    assert.equal(await tip(url, 'refs/heads/x'), b);
    assert.notEqual(await tip(url, 'refs/heads/x'), c);
    rest.forEach((r) => assert.equal(r.code, 0, r.stderr));
    for (const [n, oid] of next) assert.equal(await tip(url, `refs/heads/${n}`), oid, n);
    // p1 alone, then the three neighbours in one commit (p2's write refused before it went).
    assert.equal(count, 2, `${count} commits for 5 pushes`);
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
    // x: the plain push landed first; the lease expected `top` and was overtaken: "stale info", as
    // git's own receive-pack says, although the forced write itself would have been allowed.
    assert.equal(rPlain!.code, 0, rPlain!.stderr);
    assert.match(rLeased!.stderr, /\[rejected\] +leased -> x \(stale info\)/);
    assert.equal(await tip(url, 'refs/heads/x'), plain);
    assert.notEqual(await tip(url, 'refs/heads/x'), leased);
  });

  it('sends a batch the PDS refuses for one write as its writes, each answered on its own', async () => {
    const names = ['s1', 's2', 's3', 's4'];
    const { url, dir, top } = await seeded('group-split', names);
    const want = new Map<string, string>();
    for (const b of names) want.set(b, await branchCommit(dir, `${b}-next`, top, `${b}.txt`));
    proxy.reset();
    // The refusal one record key gets (the PDS filters words out of keys), for the whole commit.
    const refused: FaultRule = {
      nsid: 'com.atproto.repo.applyWrites',
      fault: {
        kind: 'status',
        status: 400,
        error: 'InvalidRequest',
        message: 'Unacceptable slur in record key',
      },
    };
    const results = await together(
      names.map((b) => () => alice.git(dir, 'push', url, `${b}-next:${b}`)),
      refused,
    );
    const fired = proxy.faultsFired.filter((f) => f.nsid === 'com.atproto.repo.applyWrites').length;
    proxy.clearFaults();
    assert.equal(fired, 1);
    results.forEach((r, i) => assert.equal(r.code, 0, `push of ${names[i]}: ${r.stderr}`));
    for (const b of names) assert.equal(await tip(url, `refs/heads/${b}`), want.get(b), b);
    // The first write alone, then each of the refused batch's writes again as it came, each with its
    // own answer. Had the batch's refusal been passed to every helper, every push would have failed.
    assert.equal(proxy.count('com.atproto.repo.putRecord'), 1 + names.length - 1);
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
    // The first clone's write landed first; the second's, in the batch, was refused alone, and that
    // clone has not the winner's commit: git's "fetch first".
    assert.equal(one!.code, 0, one!.stderr);
    assert.match(two!.stderr, /\[rejected\] +main -> main \(fetch first\)/);
    assert.equal(await tip(url, 'refs/heads/main'), mine[0]);
    assert.equal(r3!.code, 0, r3!.stderr);
    assert.equal(await tip(url, 'refs/heads/n1'), n1);
  });
});
