// What the warm agent spends per push when the account's hourly write budget runs low: the same
// rounds of parallel pushes through one agent, on a PDS with its rate limits on, first with the budget
// ample, then with it spent down to `--leave` points (below a tenth of 5,000: the agent then waits
// LOW_BUDGET_WINDOW_MS for more pushes per commit). Counted at the PDS's front: commit requests
// (putRecord, applyWrites) and the write points the reference PDS charges for them.
//
//   npm run build && node bench/budget-fold.ts [--pushes 6] [--rounds 4] [--leave 450] [--stagger ms]
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { makeClient, type Client } from './client.ts';
import { spendWriteBudget } from './limits.ts';
import { spawn } from 'node:child_process';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { startRig, type Rig } from './setup.ts';

const { values } = parseArgs({
  options: {
    pushes: { type: 'string', default: '6' },
    rounds: { type: 'string', default: '4' },
    leave: { type: 'string', default: '450' },
    stagger: { type: 'string', default: '0' },
  },
});
const PUSHES = Number(values.pushes);
const ROUNDS = Number(values.rounds);
/** Milliseconds between the starts of one round's pushes (0: all at once). */
const STAGGER = Number(values.stagger);
const COMMITS = ['com.atproto.repo.putRecord', 'com.atproto.repo.applyWrites'];

interface Run {
  budget: string;
  pushes: number;
  landed: number;
  commit_requests: number;
  points: number;
  commit_requests_per_push: number;
  points_per_push: number;
  /** The agent's log said the budget ran low (and so widened its window) during the run. */
  agent_saw_low_budget: boolean;
}

/** `knotless agent` on `socket`, its log kept for the runs to read; resolves once it says ready. */
function startAgent(socket: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [BIN_SCRIPTS['knotless']!, 'agent', '--socket', socket], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (log += d));
  return new Promise<{ kill: () => void; log: () => string }>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve({ kill: () => child.kill('SIGTERM'), log: () => log });
    });
    child.once('exit', (code) => reject(new Error(`the agent exited ${code}: ${log}`)));
  });
}

/** git, which throws when it fails (client.ts). */
async function must(client: Client, cwd: string, args: string[], env: Record<string, string>): Promise<void> {
  await client.git(0, cwd, args, env);
}

/** `ROUNDS` rounds of `PUSHES` pushes at once, each of its own branch, through the agent at `socket`. */
async function rounds(
  rig: Rig,
  client: Client,
  agent: { socket: string; log: () => string },
  name: string,
  budget: string,
): Promise<Run> {
  const { socket } = agent;
  const env = { KNOTLESS_AGENT: '1', KNOTLESS_AGENT_SOCKET: socket, KNOTLESS_COMPACT: '0' };
  await client.knotless(0, ['repo', 'create', name], env);
  const url = `knotless://alice.test/${name}`;
  const dir = path.join(rig.dir, name);
  fs.mkdirSync(dir);
  await must(client, dir, ['init', '-q', '-b', 'main'], env);
  await must(client, dir, ['commit', '-q', '--allow-empty', '-m', 'base'], env);
  const branches = Array.from({ length: PUSHES }, (_, i) => `b${i}`);
  for (const b of branches) await must(client, dir, ['branch', b], env);
  await must(client, dir, ['push', '-q', url, 'main', ...branches], env);
  rig.pdsFront.reset();
  const logFrom = agent.log().length;
  let landed = 0;
  for (let r = 0; r < ROUNDS; r++) {
    // One new commit on each branch, then every branch pushed at once, each by its own git.
    for (const b of branches) {
      await must(client, dir, ['checkout', '-q', b], env);
      await must(client, dir, ['commit', '-q', '--allow-empty', '-m', `${b} ${r}`], env);
    }
    const results = await Promise.allSettled(
      branches.map(async (b, i) => {
        await new Promise((r) => setTimeout(r, i * STAGGER));
        return client.git(0, dir, ['push', '-q', url, b], env);
      }),
    );
    for (const res of results) {
      if (res.status === 'fulfilled') landed++;
      else process.stderr.write(`a push failed: ${String(res.reason)}\n`);
    }
  }
  const seen = rig.pdsFront.requests.filter((q) => COMMITS.includes(q.nsid ?? ''));
  const points = seen.reduce((n, q) => n + q.points, 0);
  const pushes = PUSHES * ROUNDS;
  return {
    budget,
    pushes,
    landed,
    commit_requests: seen.length,
    points,
    commit_requests_per_push: Math.round((seen.length / pushes) * 100) / 100,
    points_per_push: Math.round((points / pushes) * 100) / 100,
    agent_saw_low_budget:
      /write points left until/.test(agent.log().slice(logFrom)) || lowBefore(agent.log(), logFrom),
  };
}

/** The budget was already said to be low before `at`, and not said to be enough again since. */
function lowBefore(log: string, at: number): boolean {
  const before = log.slice(0, at);
  return before.lastIndexOf('write points left until') > before.lastIndexOf('write points enough again');
}

const rig = await startRig([0], true, true);
try {
  const client = await makeClient(rig, true);
  const socket = path.join(rig.dir, 'agent.sock');
  const running = await startAgent(socket, client.env(0, { KNOTLESS_AGENT_IDLE: '0' }));
  const agent = { socket, log: running.log };
  try {
    const runs: Run[] = [];
    runs.push(await rounds(rig, client, agent, 'fold-ample', 'ample (5000 points/h)'));
    const left = await spendWriteBudget(rig, Number(values.leave));
    runs.push(await rounds(rig, client, agent, 'fold-low', `low (${left} points left)`));
    console.log(JSON.stringify(runs, null, 2));
  } finally {
    running.kill();
  }
} finally {
  await rig.close();
}
