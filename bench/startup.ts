// `npm run bench:startup`: how long a git command waits for the helper's first request, beside what
// Node itself needs to start, measured in one run (interleaved, so that load affects all alike).
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

const { values } = parseArgs({ options: { runs: { type: 'string', default: '20' } } });
const runs = Number(values.runs);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-startup-'));
const net = await startNetwork({ dir: path.join(dir, 'net') });
try {
  await net.ensureAccount('alice.test', 'startup-password');
  const bin = path.join(dir, 'bin');
  writeWrappers(bin);
  const env = {
    ...localEnv(dir, bin, net),
    KNOTLESS_AGENT: '0',
  };
  const opts = { cwd: dir, env };
  await run(
    process.execPath,
    [BIN_SCRIPTS['knotless']!, 'login', 'alice.test', '--app-password', 'startup-password'],
    opts,
  );
  await run(process.execPath, [BIN_SCRIPTS['knotless']!, 'repo', 'create', 'startup'], opts);
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const url = 'knotless://alice.test/startup';
  await run('git', ['init', '-q', '-b', 'main'], { ...opts, cwd: work });
  await run('git', ['commit', '-q', '--allow-empty', '-m', 'first'], { ...opts, cwd: work });
  await run('git', ['push', '-q', url, 'main'], { ...opts, cwd: work });

  // Node's own start (to user code), and Node connecting and sending one request: the floor.
  const port = new URL(net.pdsUrl).port;
  const bare = `process.stderr.write('sent at ' + Math.round(process.uptime() * 1000) + 'ms')`;
  const floor = `const s = require('node:net').connect(${port}, '127.0.0.1'); s.write('GET /xrpc/_health HTTP/1.1\\r\\nhost: x\\r\\n\\r\\n'); ${bare}; s.on('data', () => process.exit(0));`;
  const samples: Record<string, number[]> = { node: [], floor: [], helper: [] };
  const sentAt = (stderr: string): number => Number(/sent at (\d+)ms/.exec(stderr)?.[1] ?? NaN);
  for (let i = 0; i < runs; i++) {
    samples['node']!.push(sentAt((await run(process.execPath, ['-e', bare], opts)).stderr));
    samples['floor']!.push(sentAt((await run(process.execPath, ['-e', floor], opts)).stderr));
    const ls = await run('git', ['ls-remote', url], { ...opts, env: { ...env, KNOTLESS_TRACE: '1' } });
    samples['helper']!.push(sentAt(ls.stderr));
  }
  console.log(
    `knotless start-up, ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}, Node ${process.version}`,
  );
  console.log(`npm run bench:startup -- --runs ${runs}`);
  console.log('');
  console.log('| process start to first request | min ms | p50 ms | p95 ms |');
  console.log('| --- | ---: | ---: | ---: |');
  const label: Record<string, string> = {
    node: "Node reaching user code (Node's own start-up)",
    floor: 'the floor: Node connecting and sending one request',
    helper: 'git-remote-knotless answering `git ls-remote` (identity cached)',
  };
  for (const [k, v] of Object.entries(samples))
    console.log(`| ${label[k]} | ${Math.min(...v)} | ${percentile(v, 50)} | ${percentile(v, 95)} |`);
} finally {
  await net.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
