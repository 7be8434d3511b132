// `npm run bench:helper-cost`: what one `git push` of a one-file change costs the machine, through
// the warm agent (the thin helper forwards git's protocol to it: the Perl one, git's command's choice
// where perl is, and the Node one) and with the whole helper in the process (no agent), beside Node's
// floor (`node -e 0`), Perl's (`perl -e 0`) and a push to a local bare repository (git's own floor),
// all measured the same way, interleaved round by round so that load affects all alike.
//
// CPU is user + sys of the command and every process it waited for (git, the helper, the git
// commands the helper ran), from bash's `times` (getrusage of its children); wall is bash's
// EPOCHREALTIME around it. The agent's CPU is not a child of git: it is read from /proc apart and
// given per push (with the git commands it ran for the helper). The network (PDS, PLC) runs in this
// process and is counted in neither.
import { type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork } from 'knotless-devnet';
import { run } from './client.ts';
import { writeWrappers } from '../packages/knotless-devnet/src/dev/env-file.ts';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { localEnv, startAgentProcess } from './local.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' } } });
const runs = Number(values.runs);

/** The command run under bash: its wall time and its children's user and sys, in ms. */
interface Cost {
  wall: number;
  user: number;
  sys: number;
}

const MEASURE = [
  's=$EPOCHREALTIME',
  '"$@" >/dev/null 2>"$KNOTLESS_BENCH_ERR"',
  'rc=$?',
  'e=$EPOCHREALTIME',
  'times',
  'echo "$s $e $rc"',
].join('; ');

function seconds(text: string): number {
  const m = /^(\d+)m([\d.]+)s$/.exec(text);
  if (m === null) throw new Error(`bash's times printed ${text}`);
  return Number(m[1]) * 60 + Number(m[2]);
}

/** Runs `cmd` under bash and gives what it cost; fails loudly when the command fails. */
async function measure(cmd: string[], cwd: string, env: Record<string, string>): Promise<Cost> {
  const err = path.join(cwd, '..', `err-${path.basename(cwd)}`);
  const out = await run('bash', ['-c', MEASURE, 'measure', ...cmd], {
    cwd,
    env: { ...env, KNOTLESS_BENCH_ERR: err },
  });
  const [, children = '', last = ''] = out.stdout.trim().split('\n');
  const [s, e, rc] = last.split(' ');
  if (rc !== '0') throw new Error(`${cmd.join(' ')} exited ${rc}:\n${fs.readFileSync(err, 'utf8')}`);
  const [user = '', sys = ''] = children.split(' ');
  return { wall: (Number(e) - Number(s)) * 1000, user: seconds(user) * 1000, sys: seconds(sys) * 1000 };
}

/**
 * CPU ms the process and the children it waited for (the git commands the agent runs for a thin
 * helper: pack-objects, index-pack…) have used so far: /proc's utime, stime, cutime and cstime, in
 * clock ticks of 10 ms (so given as a mean over the runs).
 */
function cpuOf(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ([11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i]), 0) * 1000) / 100;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-helper-cost-'));
const net = await startNetwork({ dir: path.join(dir, 'net') });
let agent: ChildProcess | undefined;
try {
  await net.ensureAccount('alice.test', 'cost-password');
  // The direct pushes go to another account: a push to alice's would move the account the agent
  // follows, and its next push would wait for the event stream to deliver that commit (agent/stream.ts).
  await net.ensureAccount('bob.test', 'cost-password');
  const bin = path.join(dir, 'bin');
  writeWrappers(bin);
  const socket = path.join(dir, 'agent.sock');
  const env = {
    ...localEnv(dir, bin, net),
    // A compaction runs detached, outside what is measured: none, so that every push is alike.
    KNOTLESS_COMPACT: '0',
  };
  const direct = { ...env, KNOTLESS_AGENT: '0', KNOTLESS_CONFIG_DIR: path.join(dir, 'config-bob') };
  // No agent running and none set aside: what git's command does first (the Perl thin helper looks
  // for this build's socket, finds none and hands the push to Node) against Node alone. No agent is
  // started (KNOTLESS_AGENT_IDLE=0), so that every push is alike.
  const { KNOTLESS_AGENT: _agent, ...coldEnv } = direct;
  const cold = { ...coldEnv, KNOTLESS_AGENT_IDLE: '0' };
  const warm = { ...env, KNOTLESS_AGENT_SOCKET: socket };
  for (const [handle, as] of [
    ['alice.test', warm],
    ['bob.test', direct],
  ] as const) {
    const knotless = (...args: string[]) =>
      run(process.execPath, [BIN_SCRIPTS['knotless']!, ...args], {
        cwd: dir,
        env: { ...as, KNOTLESS_AGENT: '0' },
      });
    await knotless('login', handle, '--app-password', 'cost-password');
    await knotless('repo', 'create', 'cost');
  }
  agent = await startAgentProcess(socket, { ...env, KNOTLESS_AGENT_IDLE: '0' });
  const url = 'knotless://alice.test/cost';
  const bare = path.join(dir, 'bare.git');
  await run('git', ['init', '-q', '--bare', bare], { cwd: dir, env });

  // One work tree per way of pushing, each its own branch, each pushed once before measuring.
  const ways = {
    agent: { env: warm, remote: url, branch: 'via-agent' },
    // The same through the thin helper in Node (the Perl one is git's command's choice where perl is).
    agent_node: { env: { ...warm, KNOTLESS_THIN: 'node' }, remote: url, branch: 'via-agent-node' },
    direct: { env: direct, remote: 'knotless://bob.test/cost', branch: 'direct' },
    no_agent: { env: cold, remote: 'knotless://bob.test/cost', branch: 'no-agent' },
    no_agent_node: {
      env: { ...cold, KNOTLESS_THIN: 'node' },
      remote: 'knotless://bob.test/cost',
      branch: 'no-agent-node',
    },
    git_bare: { env: direct, remote: `file://${bare}`, branch: 'bare' },
  };
  const trees: Record<string, string> = {};
  for (const [name, way] of Object.entries(ways)) {
    const work = path.join(dir, name);
    fs.mkdirSync(work);
    const o = { cwd: work, env: way.env };
    await run('git', ['init', '-q', '-b', way.branch], o);
    await run('git', ['remote', 'add', 'origin', way.remote], o);
    fs.writeFileSync(path.join(work, 'file.txt'), '0\n');
    await run('git', ['add', '-A'], o);
    await run('git', ['commit', '-q', '-m', '0'], o);
    await run('git', ['push', '-q', 'origin', way.branch], o);
    trees[name] = work;
  }

  // KNOTLESS_BENCH_HELPER_PROF=DIR: each helper process measured writes its CPU profile (node
  // --cpu-prof) into DIR/<way>; the profiler's own cost is then in the figures.
  const prof = process.env['KNOTLESS_BENCH_HELPER_PROF'];
  const profiled = (name: string, e: Record<string, string>) =>
    prof === undefined || name === 'git_bare'
      ? e
      : { ...e, NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${path.join(prof, name)}` };
  const samples: Record<string, Cost[]> = {
    node_floor: [],
    perl_floor: [],
    agent: [],
    agent_node: [],
    direct: [],
    no_agent: [],
    no_agent_node: [],
    git_bare: [],
  };
  const agentCpu: Record<string, number> = { agent: 0, agent_node: 0 };
  const warmup = 3;
  const loadBefore = os.loadavg();
  for (let i = 0; i < warmup + runs; i++) {
    const keep = i >= warmup;
    const floor = await measure([process.execPath, '-e', '0'], dir, env);
    if (keep) samples['node_floor']!.push(floor);
    const perlFloor = await measure(['perl', '-e', '0'], dir, env);
    if (keep) samples['perl_floor']!.push(perlFloor);
    for (const [name, way] of Object.entries(ways)) {
      const work = trees[name]!;
      fs.writeFileSync(path.join(work, 'file.txt'), `${i + 1}\n`);
      await run('git', ['commit', '-q', '-am', String(i + 1)], { cwd: work, env: way.env });
      const through = name in agentCpu;
      const before = through ? cpuOf(agent.pid!) : 0;
      const cost = await measure(['git', 'push', '-q', 'origin', way.branch], work, profiled(name, way.env));
      if (through) {
        // The agent may finish its part (the view's update) just after git's exit: a moment to settle.
        await new Promise((r) => setTimeout(r, 50));
        if (keep) agentCpu[name]! += cpuOf(agent.pid!) - before;
      }
      if (keep) samples[name]!.push(cost);
    }
  }
  const loadAfter = os.loadavg();
  const figures = (costs: Cost[]) => {
    const cpu = costs.map((c) => c.user + c.sys);
    const wall = costs.map((c) => c.wall);
    const r = (n: number) => Math.round(n * 10) / 10;
    return {
      cpu_ms_p50: r(percentile(cpu, 50)),
      cpu_ms_min: r(Math.min(...cpu)),
      user_ms_p50: r(
        percentile(
          costs.map((c) => c.user),
          50,
        ),
      ),
      sys_ms_p50: r(
        percentile(
          costs.map((c) => c.sys),
          50,
        ),
      ),
      wall_ms_p50: r(percentile(wall, 50)),
      wall_ms_min: r(Math.min(...wall)),
    };
  };
  const result = {
    command: `npm run bench:helper-cost -- --runs ${runs}`,
    date: new Date().toISOString(),
    machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}`,
    node: process.version,
    git: (await run('git', ['--version'], { cwd: dir, env })).stdout.trim(),
    loadavg_before: loadBefore.map((l) => Math.round(l * 100) / 100),
    loadavg_after: loadAfter.map((l) => Math.round(l * 100) / 100),
    runs,
    measured: {
      node_floor: `${process.execPath} -e 0`,
      perl_floor: 'perl -e 0',
      agent:
        'git push -q origin <branch> (one-file change) with the warm agent running: the thin helper in Perl (the default where perl is on PATH)',
      agent_node: 'the same with KNOTLESS_THIN=node: the thin helper in Node',
      direct: 'the same with KNOTLESS_AGENT=0 (to another account): the whole helper in the process',
      no_agent:
        'the same with KNOTLESS_AGENT unset and no agent running (KNOTLESS_AGENT_IDLE=0: none started): the Perl thin helper looks for the socket first',
      no_agent_node: 'the same with KNOTLESS_THIN=node: Node alone',
      git_bare: 'the same to a bare repository on this disk (file://): git alone',
    },
    ...Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, figures(v)])),
    // The agent's part of a push through it (its git commands included), and the push's whole CPU.
    agent_process_cpu_ms_per_push_mean: Math.round((agentCpu['agent']! / runs) * 10) / 10,
    agent_push_total_cpu_ms:
      Math.round((figures(samples['agent']!).cpu_ms_p50 + agentCpu['agent']! / runs) * 10) / 10,
    agent_node_process_cpu_ms_per_push_mean: Math.round((agentCpu['agent_node']! / runs) * 10) / 10,
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  agent?.kill('SIGTERM');
  await net.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
