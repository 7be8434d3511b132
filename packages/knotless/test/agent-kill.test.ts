import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, useGitUser, repoMaker } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// The warm agent killed (SIGKILL) while two pushes go through it, at delays from 0 to 700 ms after
// it took the first of their sessions: the thin helper goes on directly with what git has not had
// an answer for (a push the agent had not written is written then, one it had is found landed), so
// every push lands and says so, with git's own lines only: no sentence of ours, no internal error,
// no stack. The next push works, and nothing acknowledged is lost.
const DELAYS = [0, 30, 80, 150, 250, 400, 550, 700];
const t = useNetwork(['alice.test']);
let socket = '';
let proxy: Proxy | undefined;
let agent: RunningAgent | undefined;
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_SOCKET: socket,
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));

before(async () => {
  await t.ready;
  // The agent's connections are told apart, so that a push can be shown to have gone through it.
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
});
after(() => proxy?.close());

const WRITES = new Set(['com.atproto.repo.putRecord', 'com.atproto.repo.applyWrites']);

/** The sessions the agent is serving now (its own count of the requests in progress). */
function active(at: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath: at, path: '/status' }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve((JSON.parse(text) as { active: number }).active));
      })
      .on('error', reject);
  });
}
const createRepo = repoMaker(alice, 'alice.test', 'killed');

let url = '';
const clones: string[] = [];

/** What a failed push may print: git's own lines and at most one sentence of ours, no stack. */
function assertOneSentence(stderr: string): void {
  assert.doesNotMatch(stderr, /internal error/, stderr);
  assert.doesNotMatch(stderr, /^\s+at /m, stderr);
  const ours = stderr.split('\n').filter((l) => l.startsWith('knotless: ') && !l.includes('warning:'));
  assert.ok(ours.length <= 1, stderr);
}

/** Two clones of `repo`, on branches a and b, each pushed once without an agent. */
async function twoBranches(repo: string): Promise<string[]> {
  const dirs: string[] = [];
  for (const branch of ['a', 'b']) {
    const dir = alice.dir();
    await alice.ok(dir, 'init', '-q');
    await alice.ok(dir, 'remote', 'add', 'origin', repo);
    await alice.ok(dir, 'checkout', '-q', '-b', branch);
    await commitFiles(alice, dir, { [`${branch}.txt`]: '0\n' }, `${branch} 0`);
    socket = path.join(t.tmpdir(), 'none.sock');
    await alice.ok(dir, 'push', '-q', 'origin', branch);
    dirs.push(dir);
  }
  return dirs;
}

describe('the warm agent killed while two pushes are in flight', () => {
  it('every push lands and says ok, with no sentence of ours; the next push works; nothing acknowledged is lost', async () => {
    url = await createRepo();
    clones.push(...(await twoBranches(url)));
    const acknowledged = new Map<string, string>();
    let killedServing = 0;
    for (const [round, delay] of DELAYS.entries()) {
      socket = path.join(t.tmpdir(), 'agent.sock');
      agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_IDLE: '0' });
      const heads = await Promise.all(
        ['a', 'b'].map((b, i) =>
          commitFiles(alice, clones[i]!, { [`${b}.txt`]: `${round + 1}\n` }, `${b} ${round + 1}`),
        ),
      );
      let ended = 0;
      const pushes = ['a', 'b'].map((b, i) =>
        alice.git(clones[i]!, 'push', 'origin', b).finally(() => ended++),
      );
      // The kill comes once the agent serves a session (or both pushes ended without it, which the
      // count below catches), then after the delay, which places it somewhere in the pushes.
      let serving = 0;
      for (let polls = 0; serving === 0 && ended < 2; polls++) {
        assert.ok(polls < 6000, 'the pushes neither reached the agent nor ended');
        serving = await active(socket);
        if (serving === 0) await new Promise((r) => setTimeout(r, 10));
      }
      await new Promise((r) => setTimeout(r, delay));
      // What the agent serves at the moment it is killed, asked just before.
      if (ended < 2 && (await active(socket)) > 0) killedServing++;
      const gone = new Promise((r) => agent!.child.once('exit', r));
      agent.child.kill('SIGKILL');
      await gone;
      agent = undefined;
      const results = await Promise.all(pushes);
      for (const [i, res] of results.entries()) {
        const branch = ['a', 'b'][i]!;
        assert.equal(res.code, 0, res.stderr);
        assertOneSentence(res.stderr);
        assert.deepEqual(
          res.stderr.split('\n').filter((l) => l.startsWith('knotless: ')),
          [],
          `a push that landed says nothing of ours\n${res.stderr}`,
        );
        acknowledged.set(branch, heads[i]!);
      }
      // The next push (the agent is gone: directly) works.
      const next = await commitFiles(alice, clones[0]!, { 'a.txt': `next ${round}\n` }, `a next ${round}`);
      await alice.ok(clones[0]!, 'push', '-q', 'origin', 'a');
      acknowledged.set('a', next);
      const listed = await alice.ok(alice.dir(), 'ls-remote', url);
      for (const [branch, head] of acknowledged)
        assert.ok(listed.includes(`${head}\trefs/heads/${branch}`), `${branch} lost ${head}:\n${listed}`);
    }
    // The kill met sessions in the agent: the pushes went on from the middle of their sessions.
    assert.ok(killedServing > 0, 'the agent was never killed while it served a push');
  });
});

/** The agent's git spawner: its child whose command line names it (waited for, not timed). */
async function spawnerOf(agentPid: number): Promise<number> {
  for (;;) {
    for (const entry of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        if (ppid === agentPid && fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('git-spawner'))
          return Number(entry);
      } catch (err) {
        // A process that ended while being read.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

// The agent's git spawner (the process that starts its git commands) killed while two pushes go
// through the agent: each push lands or says one sentence, a retry through the same agent works
// (it starts git itself from then on), and nothing acknowledged is lost.
describe("the agent's git spawner killed while two pushes are in flight", () => {
  it('every push lands or says one sentence; the agent goes on without it', async () => {
    const spawnerUrl = await createRepo();
    const dirs = await twoBranches(spawnerUrl);
    for (const [round, delay] of [0, 20, 60, 120].entries()) {
      socket = path.join(t.tmpdir(), `spawner-${round}.sock`);
      const running = (agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_IDLE: '0' }));
      try {
        const spawner = await spawnerOf(running.child.pid!);
        const heads = await Promise.all(
          ['a', 'b'].map((b, i) =>
            commitFiles(alice, dirs[i]!, { [`${b}.txt`]: `${round + 1}\n` }, `${b} ${round + 1}`),
          ),
        );
        const pushes = ['a', 'b'].map((b, i) => alice.git(dirs[i]!, 'push', 'origin', b));
        // The delay places the kill somewhere in the pushes; what is checked does not depend on where.
        await new Promise((r) => setTimeout(r, delay));
        process.kill(spawner, 'SIGKILL');
        for (const [i, res] of (await Promise.all(pushes)).entries()) {
          const branch = ['a', 'b'][i]!;
          if (res.code !== 0) {
            assertOneSentence(res.stderr);
            const again = await alice.git(dirs[i]!, 'push', 'origin', branch);
            assert.equal(again.code, 0, again.stderr);
          }
          const listed = await alice.ok(alice.dir(), 'ls-remote', spawnerUrl);
          assert.ok(
            listed.includes(`${heads[i]}\trefs/heads/${branch}`),
            `${branch} lost ${heads[i]}:\n${listed}`,
          );
        }
        // The agent itself is still there, and pushes through it still land: its own connections
        // carry the write, the git the push needs started by the agent itself now.
        assert.equal(running.child.exitCode, null, running.log());
        await commitFiles(alice, dirs[0]!, { 'a.txt': `after ${round}\n` }, `a after ${round}`);
        proxy!.reset();
        await alice.ok(dirs[0]!, 'push', '-q', 'origin', 'a');
        const writes = proxy!.requests.filter((r) => WRITES.has(r.nsid ?? ''));
        assert.ok(writes.length > 0, 'the push after the kill wrote nothing');
        assert.deepEqual(
          writes.filter((r) => r.pid !== running.child.pid).map((r) => r.nsid),
          [],
          `the push after the kill went around the agent\n${running.log()}`,
        );
        assert.doesNotMatch(running.log(), /internal error|^\s+at /m, running.log());
      } finally {
        await running.stop();
        agent = undefined;
      }
    }
  });
});
