import assert from 'node:assert/strict';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { startProxy, type FaultRule, type Proxy } from 'knotless-devnet';
import { agentView, spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { noise } from './faults/checks.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// A PDS's rate limit never loses a push nor leaves half of one: a 429 that says until when is waited
// out within KNOTLESS_RATE_LIMIT_WAIT (60 s), said in one line on stderr first, and the push lands;
// one past it fails the push in one sentence naming when to try again, with the ref where it was.
// The PDS stand-in is the real PDS behind the proxy, which answers 429 with the headers the reference
// PDS sends (Retry-After, RateLimit-Limit/-Remaining/-Reset/-Policy) on the writes it is told to.
// Retries of transient faults are off: the rate-limit rule is its own, not the retry policy's.
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let agent: RunningAgent | undefined;
let socket = '';
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_RETRIES: '0',
  ...(socket === '' ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: socket }),
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));
const createRepo = repoMaker(alice, 'alice.test', 'rate');
const PUT = 'com.atproto.repo.putRecord';
const APPLY = 'com.atproto.repo.applyWrites';
const UPLOAD = 'com.atproto.repo.uploadBlob';
const WRITES = [PUT, APPLY];

before(async () => {
  await t.ready;
  proxy = await startProxy({
    target: t.net.pdsUrl,
    watchPids: () => (agent ? [agent.child.pid!] : []),
  });
});
after(() => proxy?.close());
afterEach(async () => {
  proxy?.clearFaults();
  socket = '';
  await agent?.stop();
  agent = undefined;
});

/** A repository with main pushed, and a commit on top of it not pushed yet (`big`: its pack goes as a blob). */
async function ahead(big = false): Promise<{ url: string; dir: string; was: string; next: string }> {
  const url = await createRepo();
  const dir = await newRepo(alice, url);
  await commitFiles(alice, dir, { 'a.txt': '1\n' }, 'one');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  const was = (await alice.ok(dir, 'rev-parse', 'HEAD')).trim();
  const next = await commitFiles(
    alice,
    dir,
    big ? { 'big.bin': noise(40_000, 7) } : { 'a.txt': '2\n' },
    'two',
  );
  return { url, dir, was, next };
}

/** Where the PDS has main now, as git sees it. */
async function remoteMain(url: string): Promise<string> {
  return (await alice.ok(alice.dir(), 'ls-remote', url, 'refs/heads/main')).split('\t')[0]!;
}

/** Starts an agent the user's commands go through from now on. */
async function startAgent(): Promise<RunningAgent> {
  socket = path.join(t.tmpdir(), 'agent.sock');
  agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_IDLE: '0' });
  return agent;
}

/** Waits (bounded, 60 s: a guard, not a speed claim) until the agent answers from a current view. */
async function viewReady(q: { did: string; repo: string; pds: string }): Promise<boolean> {
  for (let i = 0; i < 300; i++) {
    if ((await agentView(socket, q)) !== null) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

/** Answer 429 to the `times` next requests of each of `nsids`, asking to wait `seconds`. */
function rateLimit(nsids: string[], seconds: number, times: number): void {
  for (const nsid of nsids) {
    const rule: FaultRule = { nsid, times, fault: { kind: 'rate-limit', retryAfter: seconds } };
    proxy!.inject(rule);
  }
}

const WAIT_LINE = /^knotless: the PDS asks to wait \d+ s before more writes; waiting$/m;
const SENTENCE =
  /^knotless: The PDS is rate-limiting .+ until \d{4}-\d\d-\d\dT[\d:.]+Z; try again then, in 3\d{3} s\.$/m;

/** stderr holds no stack or internal error. */
function noStack(stderr: string): void {
  assert.doesNotMatch(stderr, /internal error|^\s+at /m, stderr);
}

describe('a PDS that rate-limits writes, helper direct', () => {
  it('a ref write answered 429 with a short reset is waited out, said in one line, and lands', async () => {
    const { url, dir, next } = await ahead();
    proxy!.reset();
    rateLimit([PUT], 1, 2);
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    noStack(res.stderr);
    assert.equal(res.stderr.match(new RegExp(WAIT_LINE.source, 'gm'))?.length, 2, res.stderr);
    assert.match(res.stderr, /^knotless: the PDS asks to wait 1 s before more writes; waiting$/m);
    assert.equal(proxy!.faultsFired.length, 2);
    // Two refused, then the one that landed.
    assert.equal(proxy!.count(PUT), 3);
    assert.equal(await remoteMain(url), next);
  });

  it('a ref write answered 429 with a reset past the bound fails in one sentence naming when; the ref stays', async () => {
    const { url, dir, was } = await ahead();
    proxy!.reset();
    rateLimit([PUT], 3600, Infinity);
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.notEqual(res.code, 0);
    noStack(res.stderr);
    assert.match(res.stderr, SENTENCE);
    assert.match(res.stderr, /\[remote rejected\] +main -> main \(rate limited\)/);
    assert.doesNotMatch(res.stderr, WAIT_LINE);
    // Not sent again: the PDS said it will refuse until then.
    assert.equal(proxy!.count(PUT), 1);
    assert.equal(await remoteMain(url), was);
  });

  it('a blob upload answered 429 mid-push with a short reset is waited out and the push lands', async () => {
    const { url, dir, next } = await ahead(true);
    proxy!.reset();
    rateLimit([UPLOAD], 1, 1);
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, WAIT_LINE);
    // The refused upload was sent again, and every upload ended stored.
    const uploads = proxy!.requests.filter((r) => r.nsid === UPLOAD).map((r) => r.status);
    assert.deepEqual(
      uploads.filter((s) => s !== 200),
      [429],
    );
    assert.ok(uploads.length >= 2, JSON.stringify(uploads));
    assert.equal(await remoteMain(url), next);
    // The pack that landed is whole: a fresh clone has the pushed commit.
    const copy = path.join(t.tmpdir(), 'copy');
    await alice.ok(alice.dir(), 'clone', '-q', url, copy);
    assert.equal((await alice.ok(copy, 'rev-parse', 'HEAD')).trim(), next);
  });

  it('a blob upload answered 429 past the bound fails the push before any ref write; the ref stays', async () => {
    const { url, dir, was } = await ahead(true);
    proxy!.reset();
    rateLimit([UPLOAD], 3600, Infinity);
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.notEqual(res.code, 0);
    noStack(res.stderr);
    assert.match(res.stderr, SENTENCE);
    assert.doesNotMatch(res.stderr, /^ \* \[new|^ +[0-9a-f]+\.\.[0-9a-f]+ +main -> main/m);
    assert.equal(proxy!.count(PUT) + proxy!.count(APPLY), 0, 'no ref write was sent');
    assert.equal(await remoteMain(url), was);
  });
});

describe('a PDS that rate-limits writes, through the warm agent', () => {
  /** The ref writes the proxy saw, and how many of them the agent sent. */
  const writesBy = (running: RunningAgent) => {
    const seen = proxy!.requests.filter((r) => WRITES.includes(r.nsid ?? ''));
    return { all: seen.length, agent: seen.filter((r) => r.pid === running.child.pid).length };
  };

  it('a ref write answered 429 with a short reset is waited out, said in one line, and lands', async () => {
    // Started first, so that it carries the first push too and holds a view of the repository: a
    // refusal that wrote nothing must not cost it.
    const running = await startAgent();
    const { url, dir, next } = await ahead();
    const q = { did: t.dids['alice.test']!, repo: url.split('/').pop()!, pds: t.net.pdsUrl };
    assert.ok(await viewReady(q), 'the agent never had a view');
    proxy!.reset();
    // The agent sends a lone write as putRecord and a group as applyWrites: both are refused once.
    rateLimit(WRITES, 1, 1);
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    noStack(res.stderr);
    assert.match(res.stderr, WAIT_LINE);
    assert.equal(await remoteMain(url), next);
    // The agent carried every ref write: the refused one and the one that landed.
    const sent = writesBy(running);
    assert.ok(sent.all >= 2 && sent.agent === sent.all, JSON.stringify(sent));
    assert.doesNotMatch(running.log(), /dropped the view of/);
    const view = await agentView(socket, q);
    assert.equal(view?.get('refs/heads/main')?.target, next, 'the view took the write that landed');
  });

  it('a ref write answered 429 past the bound fails in one sentence naming when; the ref stays', async () => {
    const { url, dir, was } = await ahead();
    const running = await startAgent();
    proxy!.reset();
    rateLimit(WRITES, 3600, Infinity);
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.notEqual(res.code, 0);
    noStack(res.stderr);
    assert.match(res.stderr, SENTENCE);
    assert.match(res.stderr, /\[remote rejected\] +main -> main \(rate limited\)/);
    const sent = writesBy(running);
    assert.ok(sent.all === 1 && sent.agent === 1, JSON.stringify(sent));
    proxy!.clearFaults();
    assert.equal(await remoteMain(url), was);
  });
});
