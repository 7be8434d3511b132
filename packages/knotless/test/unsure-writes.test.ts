import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// A write whose answer comes later than KNOTLESS_HTTP_TIMEOUT may have landed. The helper reads the
// record back: landed, git hears `ok`; not landed, the time-out is the answer, and its sentence
// names the limit in force, directly and through the warm agent (whose own limit is longer).
const LIMIT_S = 5;
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let socket = '';
let agent: RunningAgent | undefined;
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_HTTP_TIMEOUT: String(LIMIT_S),
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
  ...(agent === undefined ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: socket }),
}));
// The helper writes one ref with putRecord; the agent may group it into an applyWrites.
const WRITES = ['com.atproto.repo.putRecord', 'com.atproto.repo.applyWrites'];
const createRepo = repoMaker(alice, 'alice.test', 'unsure');

before(async () => {
  await t.ready;
  // The agent's connections are told apart: through it, the write must have been the agent's.
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
});
after(async () => {
  await agent?.stop();
  await proxy?.close();
});

/** A repository with main pushed, and a new commit on main not pushed yet. */
async function pending(): Promise<{ dir: string; url: string; head: string }> {
  const url = await createRepo();
  const dir = await newRepo(alice, url);
  await commitFiles(alice, dir, { 'a.txt': '1\n' }, 'one');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  const head = await commitFiles(alice, dir, { 'a.txt': '2\n' }, 'two');
  return { dir, url, head };
}

/**
 * Runs `push` and checks who sent its writes: all of them the agent's through the agent, none of
 * them directly.
 */
async function pushing<T>(push: () => Promise<T>): Promise<T> {
  const from = proxy!.requests.length;
  const res = await push();
  const writes = proxy!.requests.slice(from).filter((r) => WRITES.includes(r.nsid ?? ''));
  assert.ok(writes.length > 0, 'the push sent no write');
  const byAgent = writes.filter((r) => agent !== undefined && r.pid === agent.child.pid).length;
  assert.equal(
    byAgent,
    agent === undefined ? 0 : writes.length,
    `${byAgent} of ${writes.length} writes by the agent`,
  );
  return res;
}

const remoteMain = async (url: string) =>
  (await alice.ok(alice.dir(), 'ls-remote', url, 'refs/heads/main')).split('\t')[0];

for (const mode of ['directly', 'through the warm agent']) {
  describe(`a write whose answer is later than the time limit, ${mode}`, () => {
    before(async () => {
      if (mode === 'directly') return;
      socket = path.join(t.tmpdir(), 'agent.sock');
      // The agent's own limit is the default (120 s): the helper's is the one in force.
      const env = { ...alice.env, KNOTLESS_SERVICE: proxy!.url, KNOTLESS_AGENT_IDLE: '0' };
      agent = await spawnAgent(socket, env);
    });
    after(async () => {
      await agent?.stop();
      agent = undefined;
    });

    it('that landed is answered ok, after reading it back', async () => {
      const { dir, url, head } = await pending();
      proxy!.clearFaults();
      for (const nsid of WRITES) proxy!.inject({ nsid, fault: { kind: 'slow-answer', everyMs: 1000 } });
      const push = await pushing(() => alice.git(dir, 'push', 'origin', 'main'));
      proxy!.clearFaults();
      assert.equal(push.code, 0, push.stderr);
      assert.doesNotMatch(push.stderr, /rejected|timed out/, push.stderr);
      assert.equal(await remoteMain(url), head);
    });

    it('that landed, in an atomic push, is answered ok too', async () => {
      const { dir, url, head } = await pending();
      proxy!.clearFaults();
      proxy!.inject({ nsid: 'com.atproto.repo.applyWrites', fault: { kind: 'slow-answer', everyMs: 1000 } });
      const push = await pushing(() => alice.git(dir, 'push', '--atomic', 'origin', 'main'));
      proxy!.clearFaults();
      assert.equal(push.code, 0, push.stderr);
      assert.doesNotMatch(push.stderr, /rejected|timed out/, push.stderr);
      assert.equal(await remoteMain(url), head);
    });

    it('that did not land is the time-out, naming the limit in force', async () => {
      const { dir, url } = await pending();
      const before = await remoteMain(url);
      proxy!.clearFaults();
      // Answers 200 and never finishes the body (a byte a second); nothing reaches the PDS.
      for (const nsid of WRITES) proxy!.inject({ nsid, fault: { kind: 'trickle', everyMs: 1000 } });
      const push = await pushing(() => alice.git(dir, 'push', 'origin', 'main'));
      proxy!.clearFaults();
      assert.equal(push.code, 1, push.stderr);
      assert.match(push.stderr, /\[remote rejected\] main -> main \(pds timed out\)/);
      assert.match(
        push.stderr,
        new RegExp(`within ${LIMIT_S} s, so it was cut off; .+KNOTLESS_HTTP_TIMEOUT`),
      );
      assert.doesNotMatch(push.stderr, /internal error|\n\s+at /);
      assert.equal(await remoteMain(url), before);
    });
  });
}
