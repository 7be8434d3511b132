import assert from 'node:assert/strict';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// A warm agent that stops answering in the middle of a command (SIGSTOP: alive, its socket open,
// silent) never hangs git: the thin helper gives up after KNOTLESS_AGENT_SILENCE seconds without a
// record from it, with one sentence and a non-zero status, and a push whose write the agent had sent
// is reported neither as `ok` nor as refused: its outcome is unknown, and the sentence says how to
// see it. An agent that is slow but working (its PDS slow) beats while it works, and is not cut off.
const SILENCE_S = 3;
const t = useNetwork(['alice.test']);
let socket = '';
let proxy: Proxy | undefined;
let agent: RunningAgent | undefined;
// Each case runs with each thin helper: the Perl one (the default where perl is on PATH), the Node one.
const THINS = [
  { name: 'in Perl', env: {} as Record<string, string> },
  { name: 'in Node', env: { KNOTLESS_THIN: 'node' } as Record<string, string> },
];
let thinEnv: Record<string, string> = {};
const alice = useGitUser(t, 'alice.test', () => ({
  ...thinEnv,
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_SOCKET: socket,
  KNOTLESS_AGENT_SILENCE: String(SILENCE_S),
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));
const createRepo = repoMaker(alice, 'alice.test', 'silent');

/** Requests of these XRPC methods wait at the proxy, once one arrived, until `release`. */
interface Hold {
  nsids: Set<string>;
  arrived: Promise<void>;
  arrive: () => void;
  released: Promise<void>;
  release: () => void;
}
let hold: Hold | undefined;

/**
 * Holds the next request of one of `nsids` (`*`: any but an event stream's) at the proxy; `arrived`
 * settles once one waits there.
 */
function holdNext(nsids: string[]): Hold {
  const h = { nsids: new Set(nsids), arrive: () => {}, release: () => {} } as Hold;
  h.arrived = new Promise<void>((r) => (h.arrive = r));
  h.released = new Promise<void>((r) => (h.release = r));
  hold = h;
  return h;
}

before(async () => {
  await t.ready;
  // The agent's connections are told apart, so that a command can be shown to have gone through it.
  proxy = await startProxy({
    target: t.net.pdsUrl,
    watchPids: () => (agent ? [agent.child.pid!] : []),
    onRequest: async ({ nsid }) => {
      const h = hold;
      if (h === undefined || nsid === undefined) return;
      if (!(h.nsids.has(nsid) || (h.nsids.has('*') && !nsid.includes('subscribe')))) return;
      hold = undefined;
      h.arrive();
      await h.released;
    },
  });
});
after(() => proxy?.close());
afterEach(async () => {
  hold?.release();
  hold = undefined;
  if (agent === undefined) return;
  // A stopped agent is let go on, then stopped as any other.
  agent.child.kill('SIGCONT');
  await agent.stop();
  agent = undefined;
});

const WRITES = ['com.atproto.repo.putRecord', 'com.atproto.repo.applyWrites'];

/** A repository with one commit on main, pushed without an agent; the clone it was pushed from. */
async function pushedRepo(): Promise<{ url: string; dir: string }> {
  const url = await createRepo();
  const dir = alice.dir();
  await alice.ok(dir, 'init', '-q', '-b', 'main');
  await alice.ok(dir, 'remote', 'add', 'origin', url);
  await commitFiles(alice, dir, { 'a.txt': '1\n' }, 'one');
  socket = path.join(t.tmpdir(), 'none.sock');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  return { url, dir };
}

/** Starts an agent at a new socket, which the user's commands use from now on. */
async function startAgent(): Promise<RunningAgent> {
  socket = path.join(t.tmpdir(), 'agent.sock');
  agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_IDLE: '0' });
  return agent;
}

/** What git printed holds our sentence once, and no internal error or stack. */
function assertSentence(stderr: string, sentence: RegExp): void {
  assert.doesNotMatch(stderr, /internal error|^\s+at /m, stderr);
  const ours = stderr.split('\n').filter((l) => l.startsWith('knotless: ') && !l.includes('warning:'));
  assert.equal(ours.length, 1, stderr);
  assert.match(ours[0]!, sentence, stderr);
}

/** The requests of these XRPC methods the proxy saw, and which of them the agent sent. */
function sentBy(nsids: string[]): { all: number; agent: number } {
  const pid = agent?.child.pid;
  const seen = proxy!.requests.filter((r) => nsids.includes(r.nsid ?? ''));
  return { all: seen.length, agent: seen.filter((r) => r.pid === pid).length };
}

for (const thin of THINS)
  describe(`a warm agent that stops answering mid-command, to the thin helper ${thin.name}`, () => {
    before(() => (thinEnv = thin.env));
    after(() => (thinEnv = {}));
    it('a fetch ends with one sentence and a non-zero status', async () => {
      const { url } = await pushedRepo();
      const running = await startAgent();
      proxy!.reset();
      const held = holdNext(['*']);
      const clone = alice.git(t.tmpdir(), 'clone', url, 'copy');
      await held.arrived;
      // A request of the clone is on its way to the agent: the agent stops, then the PDS answers it.
      running.child.kill('SIGSTOP');
      held.release();
      const res = await clone;
      assert.notEqual(res.code, 0, res.stderr);
      assertSentence(res.stderr, /The warm agent stopped answering for \d+ s in the middle of the command/);
      // The agent carried the fetch: every request to the PDS was its own.
      const all = proxy!.requests;
      const pid = running.child.pid;
      assert.ok(
        all.length > 0 && all.every((r) => r.pid === pid),
        JSON.stringify(all.map((r) => [r.nsid, r.pid])),
      );
    });

    it('a push whose write the agent sent says its outcome is unknown, neither ok nor refused', async () => {
      const { url, dir } = await pushedRepo();
      const running = await startAgent();
      const was = (await alice.ok(dir, 'rev-parse', 'HEAD')).trim();
      const head = await commitFiles(alice, dir, { 'a.txt': '2\n' }, 'two');
      proxy!.reset();
      const held = holdNext(WRITES);
      const push = alice.git(dir, 'push', '--porcelain', 'origin', 'main');
      await held.arrived;
      // The write is at the PDS's door: the agent stops, the write goes on and lands.
      running.child.kill('SIGSTOP');
      held.release();
      const res = await push;
      assert.notEqual(res.code, 0, res.stderr);
      assertSentence(
        res.stderr,
        /The warm agent stopped answering for \d+ s in the middle of the push, so whether it landed is unknown; run `git ls-remote origin` \(or `git fetch origin`\) to see/,
      );
      // git had no answer for the ref: no line of a ref pushed, up to date or refused.
      assert.doesNotMatch(res.stdout, /refs\/heads\/main/, res.stdout);
      assert.doesNotMatch(res.stderr, /\[(new branch|rejected|remote rejected)\]|main -> main/, res.stderr);
      const writes = sentBy(WRITES);
      assert.ok(writes.agent > 0 && writes.agent === writes.all, JSON.stringify(writes));
      // Its outcome is there to see, as the sentence says (directly: the agent is still stopped).
      socket = path.join(t.tmpdir(), 'none.sock');
      const listed = await alice.ok(alice.dir(), 'ls-remote', url, 'refs/heads/main');
      assert.ok(
        [head, was].some((c) => listed === `${c}\trefs/heads/main\n`),
        listed,
      );
    });

    it('a push through an agent whose PDS is slower than the bound still lands', async () => {
      const { url, dir } = await pushedRepo();
      const running = await startAgent();
      const head = await commitFiles(alice, dir, { 'a.txt': '3\n' }, 'three');
      proxy!.reset();
      const held = holdNext(WRITES);
      const push = alice.git(dir, 'push', 'origin', 'main');
      await held.arrived;
      // The PDS takes three bounds to take the write; the agent beats meanwhile.
      await new Promise((r) => setTimeout(r, 3 * SILENCE_S * 1000));
      held.release();
      const res = await push;
      assert.equal(res.code, 0, res.stderr);
      assert.doesNotMatch(res.stderr, /knotless: /, res.stderr);
      const writes = sentBy(WRITES);
      assert.ok(writes.agent > 0 && writes.agent === writes.all, JSON.stringify(writes));
      assert.equal(running.child.exitCode, null, running.log());
      const listed = await alice.ok(alice.dir(), 'ls-remote', url);
      assert.ok(listed.includes(`${head}\trefs/heads/main`), listed);
    });
  });
