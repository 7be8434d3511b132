import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import type { Client } from './client.ts';
import { CpuAccount, type CpuBreakdown } from './cpu-account.ts';
import type { Rig } from './setup.ts';
import { percentile } from './stats.ts';
import type { DriverJob, DriverResult } from './swarm-driver.ts';

/** Runs the swarm's pushing side in a process of its own (swarm-driver.ts says why). */
function runDriver(job: DriverJob): Promise<DriverResult> {
  return new Promise((resolve, reject) => {
    const driver = path.join(import.meta.dirname, 'swarm-driver.ts');
    const child = spawn(process.execPath, [...process.execArgv, driver], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(JSON.parse(out) as DriverResult);
      else reject(new Error(`the swarm driver exited ${code}`));
    });
    child.stdin.end(JSON.stringify(job));
  });
}

/** How the swarm's pushes reach the PDS: through one warm agent they share, or each on its own. */
export type SwarmVia = 'agent' | 'direct';

/** What N agents pushing at once achieved. */
export interface SwarmResult {
  agents: number;
  via: SwarmVia;
  seconds: number;
  attempted: number;
  landed: number;
  failures: Record<string, number>;
  /** Push latencies (git push, start to end), in ms. */
  p50: number;
  p95: number;
  max: number;
  /** Commits the PDS made during the run (putRecord, deleteRecord, applyWrites), compactions' too. */
  commits: number;
  /** Commits per second, over the run and the pushes still in flight at its end (`elapsed_s`). */
  commits_per_second: number;
  elapsed_s: number;
  /** Pushes landed per second. */
  pushes_per_second: number;
  /** What git printed for the first failed push, if one failed. */
  sample_error?: string;
  /** Requests the PDS had per push landed, by XRPC method (the agent's event stream included). */
  requests_per_push: Record<string, number>;
  /** CPU per push by process, with `--cpu`. */
  cpu?: CpuBreakdown;
}

/** Requests that make a commit in the account. */
const COMMITS = [
  'com.atproto.repo.putRecord',
  'com.atproto.repo.deleteRecord',
  'com.atproto.repo.applyWrites',
];

/** Starts `knotless agent` on a socket of its own, its log in a file beside it; resolves once ready. */
async function startAgent(
  client: Client,
  rtt: number,
  dir: string,
): Promise<{ socket: string; pid: number; stop(): Promise<void> }> {
  const socket = path.join(dir, 'agent.sock');
  const log = fs.openSync(path.join(dir, 'agent.log'), 'a');
  // KNOTLESS_BENCH_AGENT_PROF=DIR: the agent's CPU profile (node --cpu-prof) is written into DIR.
  const prof = process.env['KNOTLESS_BENCH_AGENT_PROF'];
  const flags = prof ? ['--cpu-prof', `--cpu-prof-dir=${prof}`] : [];
  const child = spawn(process.execPath, [...flags, BIN_SCRIPTS['knotless']!, 'agent', '--socket', socket], {
    env: client.env(rtt, { KNOTLESS_COMPACT: '1' }),
    stdio: ['ignore', 'pipe', log],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`the agent exited ${code}; see ${dir}/agent.log`)));
  });
  return {
    socket,
    pid: child.pid!,
    stop: async () => {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
      fs.closeSync(log);
    },
  };
}

/**
 * N agents, each with its own clone and branch, all in one account, each committing and pushing a
 * small change every second (as soon as its previous push ends, when that took longer), with
 * background compaction on. `via`: every push goes through one warm agent (`knotless agent`, which
 * group-commits the ref writes that reach it together), or each helper talks to the PDS itself.
 */
export async function runSwarm(
  rig: Rig,
  client: Client,
  rtt: number,
  agents: number,
  seconds: number,
  via: SwarmVia = 'direct',
  cpu = false,
): Promise<SwarmResult> {
  const name = `swarm-${via}-${agents}`;
  const url = `knotless://alice.test/${name}`;
  const work = path.join(client.home, name);
  fs.mkdirSync(work);
  const agent = via === 'agent' ? await startAgent(client, rtt, work) : undefined;
  try {
    const account = cpu ? new CpuAccount(work) : undefined;
    return await swarm(rig, client, rtt, agents, seconds, via, url, work, agent, account);
  } finally {
    await agent?.stop();
  }
}

async function swarm(
  rig: Rig,
  client: Client,
  rtt: number,
  agents: number,
  seconds: number,
  via: SwarmVia,
  url: string,
  work: string,
  agent: { socket: string; pid: number } | undefined,
  account: CpuAccount | undefined,
): Promise<SwarmResult> {
  const name = path.basename(work);
  const defaults = {
    KNOTLESS_COMPACT: '1',
    ...(agent === undefined ? {} : { KNOTLESS_AGENT: '1', KNOTLESS_AGENT_SOCKET: agent.socket }),
    ...(account === undefined ? {} : account.env({ PATH: client.env(rtt)['PATH']! })),
  };
  const load = account === undefined ? {} : account.env({ PATH: client.env(rtt)['PATH']! });
  await client.knotless(rtt, ['repo', 'create', name]);
  const seed = path.join(work, 'seed');
  fs.mkdirSync(seed);
  await client.git(rtt, seed, ['init', '-q', '-b', 'main']);
  fs.writeFileSync(path.join(seed, 'README.md'), 'swarm\n');
  await client.git(rtt, seed, ['add', '-A']);
  await client.git(rtt, seed, ['commit', '-q', '-m', 'seed']);
  await client.git(rtt, seed, ['push', '-q', url, 'main']);
  const dirs: string[] = [];
  for (let i = 0; i < agents; i++) {
    const dir = path.join(work, `agent-${i}`);
    await client.git(rtt, client.home, ['clone', '-q', url, dir]);
    await client.git(rtt, dir, ['checkout', '-q', '-b', `agent-${i}`]);
    dirs.push(dir);
  }

  rig.pdsFront.reset();
  account?.start(agent?.pid);
  const job: DriverJob = {
    dirs,
    seconds,
    home: client.home,
    loadEnv: client.env(rtt, load),
    pushEnv: client.env(rtt, defaults),
  };
  const r = await runDriver(job);
  const cpu = account?.finish(agent?.pid, r.landed, r.cpuMs);
  const elapsed = r.elapsed;
  const { attempted, landed, latencies, failures, sample } = r;
  const byMethod: Record<string, number> = {};
  for (const req of rig.pdsFront.requests) {
    const nsid = req.nsid ?? req.path.split('?')[0]!;
    byMethod[nsid] = (byMethod[nsid] ?? 0) + 1;
  }
  const requestsPerPush = Object.fromEntries(
    Object.entries(byMethod)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => [k, Math.round((v / Math.max(1, landed)) * 100) / 100]),
  );
  const commits = COMMITS.reduce((n, nsid) => n + rig.pdsFront.count(nsid), 0);
  const perSecond = (n: number) => Math.round((n / elapsed) * 10) / 10;
  return {
    agents,
    via,
    seconds,
    attempted,
    landed,
    failures,
    p50: Math.round(percentile(latencies, 50)),
    p95: Math.round(percentile(latencies, 95)),
    max: Math.round(Math.max(0, ...latencies)),
    commits,
    commits_per_second: perSecond(commits),
    elapsed_s: Math.round(elapsed),
    pushes_per_second: perSecond(landed),
    requests_per_push: requestsPerPush,
    ...(sample === undefined ? {} : { sample_error: sample }),
    ...(cpu === undefined ? {} : { cpu }),
  };
}

/** One line per swarm run: the PDS's requests per push landed, by method. */
export function requestLines(results: SwarmResult[]): string {
  return results
    .map((r) => {
      const methods = Object.entries(r.requests_per_push)
        .map(([k, v]) => `${k.replace(/^com\.atproto\./, '')} ${v}`)
        .join(', ');
      return `- ${r.agents} ${r.via}: ${methods}`;
    })
    .join('\n');
}

/** A Markdown table of swarm runs. */
export function swarmTable(results: SwarmResult[]): string {
  const rows = results.map((r) => {
    const fails =
      Object.entries(r.failures)
        .map(([k, v]) => `${k}: ${v}`)
        .join(', ') || 'none';
    return `| ${r.agents} | ${r.via} | ${r.landed}/${r.attempted} | ${fails} | ${r.p50} | ${r.p95} | ${r.max} | ${r.pushes_per_second} | ${r.commits_per_second} |`;
  });
  return [
    '| agents | via | landed/attempted | failures | p50 ms | p95 ms | max ms | pushes/s | PDS commits/s |',
    '| ---: | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n');
}
