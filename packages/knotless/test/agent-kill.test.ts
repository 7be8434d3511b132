import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { spawnAgent } from './helpers/agent.ts';
import { commitFiles, useGitUser, repoMaker } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// The warm agent killed (SIGKILL) while two pushes go through it, at delays from 0 to 700 ms: a
// push either lands and says so, or says one sentence, never an internal error with a stack. Where
// nothing was written yet, the push goes on directly. A retry works, and nothing acknowledged is lost.
const DELAYS = [0, 30, 80, 150, 250, 400, 550, 700];
const t = useNetwork(['alice.test']);
let socket = '';
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_AGENT_SOCKET: socket }));
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
  it('every push lands and says ok, or says one sentence; a retry works; nothing acknowledged is lost', async (ctx) => {
    url = await createRepo();
    clones.push(...(await twoBranches(url)));
    const acknowledged = new Map<string, string>();
    let onTheirOwn = 0;
    for (const [round, delay] of DELAYS.entries()) {
      socket = path.join(t.tmpdir(), 'agent.sock');
      const agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_IDLE: '0' });
      const heads = await Promise.all(
        ['a', 'b'].map((b, i) =>
          commitFiles(alice, clones[i]!, { [`${b}.txt`]: `${round + 1}\n` }, `${b} ${round + 1}`),
        ),
      );
      const pushes = ['a', 'b'].map((b, i) => alice.git(clones[i]!, 'push', 'origin', b));
      // The delay places the kill somewhere in the pushes; what is checked does not depend on where.
      await new Promise((r) => setTimeout(r, delay));
      const gone = new Promise((r) => agent.child.once('exit', r));
      agent.child.kill('SIGKILL');
      await gone;
      const results = await Promise.all(pushes);
      for (const [i, res] of results.entries()) {
        const branch = ['a', 'b'][i]!;
        if (res.code === 0) {
          acknowledged.set(branch, heads[i]!);
          onTheirOwn++;
          continue;
        }
        assertOneSentence(res.stderr);
        // A retry (the agent is gone: directly) works.
        const again = await alice.git(clones[i]!, 'push', 'origin', branch);
        assert.equal(again.code, 0, again.stderr);
        acknowledged.set(branch, heads[i]!);
      }
      const listed = await alice.ok(alice.dir(), 'ls-remote', url);
      for (const [branch, head] of acknowledged)
        assert.ok(listed.includes(`${head}\trefs/heads/${branch}`), `${branch} lost ${head}:\n${listed}`);
    }
    // Pushes go on by themselves where nothing was written (directly, without the agent).
    ctx.diagnostic(`${onTheirOwn} of ${DELAYS.length * 2} pushes landed without a retry`);
    assert.ok(onTheirOwn > 0, 'no push went on after the agent was killed');
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
      const agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_IDLE: '0' });
      try {
        const spawner = await spawnerOf(agent.child.pid!);
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
        // The agent itself is still there, and pushes through it still land.
        assert.equal(agent.child.exitCode, null, agent.log());
        await commitFiles(alice, dirs[0]!, { 'a.txt': `after ${round}\n` }, `a after ${round}`);
        await alice.ok(dirs[0]!, 'push', '-q', 'origin', 'a');
        assert.match(agent.log(), /listening/);
        assert.doesNotMatch(agent.log(), /internal error|^\s+at /m, agent.log());
      } finally {
        await agent.stop();
      }
    }
  });
});
