// `npm run bench:agent-start`: what a command that starts the warm agent costs on the clock, beside
// the same command with the agent off (KNOTLESS_AGENT=0): a one-line `git push`, and a one-file
// `knotless repo commit`. Before each measured command no agent runs (the one the last command
// started is waited for and stopped), so every "starts" sample is a first command that starts one;
// the ways alternate in order round by round so that load affects them alike. Wall time around the
// whole command (git and its helper, or the CLI), as client.ts's `run` measures it; the network (PDS,
// PLC) runs in this process.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork } from 'knotless-devnet';
import { run } from './client.ts';
import { writeWrappers } from '../packages/knotless-devnet/src/dev/env-file.ts';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { localEnv } from './local.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '10' } } });
const runs = Number(values.runs);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-agent-start-'));
const net = await startNetwork({ dir: path.join(dir, 'net') });
const bin = path.join(dir, 'bin');
writeWrappers(bin);
const env = { ...localEnv(dir, bin, net), KNOTLESS_COMPACT: '0', KNOTLESS_AGENT_IDLE: '60' };
const off = { ...env, KNOTLESS_AGENT: '0' };
const knotless = (args: string[], e: Record<string, string> = off) =>
  run(process.execPath, [BIN_SCRIPTS['knotless']!, ...args], { cwd: dir, env: e });

/** Waits for the agent a command started, then stops it: the next command finds none. */
async function noAgent(): Promise<void> {
  // A started agent's log is made before it is spawned: none, nothing was started.
  const log = path.join(dir, 'cache', 'agent', 'agent.log');
  if (!fs.existsSync(log)) return;
  for (let i = 0; ; i++) {
    const status = JSON.parse((await knotless(['agent', 'status', '--json'], env)).stdout) as {
      running: boolean;
    };
    if (status.running) break;
    if (i === 300) throw new Error(`the agent a command started never ran:\n${fs.readFileSync(log, 'utf8')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await knotless(['agent', 'stop'], env);
  fs.rmSync(log, { force: true });
}

try {
  await net.ensureAccount('alice.test', 'start-password');
  await knotless(['login', 'alice.test', '--app-password', 'start-password']);
  await knotless(['repo', 'create', 'start']);
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const git = (args: string[], e: Record<string, string>) => run('git', args, { cwd: work, env: e });
  await git(['init', '-q', '-b', 'main'], off);
  await git(['remote', 'add', 'origin', 'knotless://alice.test/start'], off);
  fs.writeFileSync(path.join(work, 'file.txt'), '0\n');
  await git(['add', '-A'], off);
  await git(['commit', '-q', '-m', '0'], off);
  await git(['push', '-q', 'origin', 'main'], off);

  const ways = { push_starts: env, push_off: off, commit_starts: env, commit_off: off };
  const samples: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
  const file = path.join(dir, 'commit.txt');
  const loadBefore = os.loadavg();
  for (let i = 0; i < runs; i++) {
    const order = Object.entries(ways);
    if (i % 2 === 1) order.reverse();
    for (const [name, e] of order) {
      await noAgent();
      if (name.startsWith('push')) {
        // The repository's branch moved by the commits below: the work tree follows it first.
        await git(['pull', '-q', '--rebase', 'origin', 'main'], off);
        fs.writeFileSync(path.join(work, 'file.txt'), `${i} ${name}\n`);
        await git(['commit', '-q', '-am', `${i} ${name}`], off);
        samples[name]!.push((await git(['push', '-q', 'origin', 'main'], e)).ms);
      } else {
        fs.writeFileSync(file, `${i} ${name}\n`);
        const args = ['repo', 'commit', 'start', '-m', `${i} ${name}`, '--add', `other.txt=${file}`];
        samples[name]!.push((await knotless(args, e)).ms);
      }
    }
  }
  await noAgent();
  const r = (n: number) => Math.round(n);
  console.log(
    JSON.stringify(
      {
        command: `npm run bench:agent-start -- --runs ${runs}`,
        date: new Date().toISOString(),
        machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}`,
        node: process.version,
        loadavg_before: loadBefore.map((l) => Math.round(l * 100) / 100),
        loadavg_after: os.loadavg().map((l) => Math.round(l * 100) / 100),
        runs,
        measured: {
          push_starts: 'git push -q of a one-line change, no agent running: the push starts one',
          push_off: 'the same with KNOTLESS_AGENT=0',
          commit_starts: 'knotless repo commit of one file, no agent running: the command starts one',
          commit_off: 'the same with KNOTLESS_AGENT=0',
        },
        ...Object.fromEntries(
          Object.entries(samples).map(([k, v]) => [
            k,
            { wall_ms_p50: r(percentile(v, 50)), wall_ms_min: r(Math.min(...v)) },
          ]),
        ),
      },
      null,
      2,
    ),
  );
} finally {
  await knotless(['agent', 'stop'], env);
  await net.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
