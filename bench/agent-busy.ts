// `npm run bench:agent-busy`: what the warm agent costs on a busy PDS. A dev PDS where many other
// accounts write continuously (as on any hosted PDS) carries all their commits on the event stream the
// agent follows for one account's repository; this measures the agent's CPU time and the bytes it
// reads while it does, over a fixed window.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork, startTraffic } from 'knotless-devnet';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';

const { values } = parseArgs({
  options: {
    accounts: { type: 'string', default: '200' },
    seconds: { type: 'string', default: '30' },
    'pause-ms': { type: 'string', default: '1000' },
  },
});
const accounts = Number(values.accounts);
const seconds = Number(values.seconds);
const pauseMs = Number(values['pause-ms']);
const password = 'busy-password';

/** CPU seconds (user + system) and bytes read so far by a process, from /proc. */
function usage(pid: number): { cpu: number; bytes: number } {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  const io = fs.readFileSync(`/proc/${pid}/io`, 'utf8');
  return { cpu: ticks / 100, bytes: Number(/^rchar: (\d+)/m.exec(io)?.[1] ?? NaN) };
}

/** The agent's answer to /view (confirmed or not). */
function view(socket: string, q: Record<string, string>): Promise<{ confirmed: boolean }> {
  return new Promise((resolve, reject) => {
    http
      .get({ socketPath: socket, path: `/view?${new URLSearchParams(q).toString()}` }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(JSON.parse(text) as { confirmed: boolean }));
      })
      .on('error', reject);
  });
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-busy-'));
const net = await startNetwork({ dir: path.join(dir, 'net') });
try {
  const alice = await net.ensureAccount('alice.test', password);
  const others = [];
  for (let i = 0; i < accounts; i++) others.push(await net.ensureAccount(`busy-${i}.test`, password));
  const traffic = await startTraffic(net.pdsUrl, others, password, { pauseMs });
  const socket = path.join(dir, 'agent.sock');
  const agent = spawn(process.execPath, [BIN_SCRIPTS['knotless']!, 'agent', '--socket', socket], {
    env: {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      HOME: dir,
      KNOTLESS_CACHE_DIR: path.join(dir, 'cache'),
      KNOTLESS_CONFIG_DIR: path.join(dir, 'config'),
      KNOTLESS_PLC_URL: net.plcUrl,
      KNOTLESS_DEV_PDS: net.pdsUrl,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    agent.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve();
    });
    agent.once('exit', (code) => reject(new Error(`the agent exited ${code}`)));
  });
  // The agent serves alice's repository: it follows the PDS's stream and keeps the view current.
  const q = { did: alice.did, repo: 'site', pds: net.pdsUrl };
  const deadline = Date.now() + 60_000;
  while (!(await view(socket, q)).confirmed) {
    if (Date.now() > deadline) throw new Error('the agent never had a current view');
    await new Promise((r) => setTimeout(r, 200));
  }
  const w0 = traffic.writes;
  const u0 = usage(agent.pid!);
  const t0 = Date.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const u1 = usage(agent.pid!);
  const elapsed = (Date.now() - t0) / 1000;
  const writes = traffic.writes - w0;
  // Still current after the window: the agent kept up (and served, not only survived).
  const current = (await view(socket, q)).confirmed;
  await traffic.stop();
  // The same window with nobody writing: what the agent costs by itself (heartbeats, timers).
  const i0 = usage(agent.pid!);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const i1 = usage(agent.pid!);
  agent.kill('SIGTERM');
  await new Promise((r) => agent.once('exit', r));
  const perMinute = 60 / elapsed;
  console.log(
    JSON.stringify(
      {
        command: `npm run bench:agent-busy -- --accounts ${accounts} --seconds ${seconds} --pause-ms ${pauseMs}`,
        at: new Date().toISOString(),
        machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}, Node ${process.version}`,
        accounts,
        seconds: Math.round(elapsed * 10) / 10,
        commitsPerSecond: Math.round((writes / elapsed) * 10) / 10,
        agent: {
          cpuSecondsPerMinute: Math.round((u1.cpu - u0.cpu) * perMinute * 100) / 100,
          bytesReadPerMinute: Math.round((u1.bytes - u0.bytes) * perMinute),
          bytesPerCommit: Math.round((u1.bytes - u0.bytes) / Math.max(writes, 1)),
          viewCurrentAfter: current,
          idleCpuSecondsPerMinute: Math.round((i1.cpu - i0.cpu) * perMinute * 100) / 100,
        },
      },
      null,
      2,
    ),
  );
} finally {
  await net.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
