// `npm run bench:tls`: start-up to one finished https request, the helper's hand-written client
// against node:https loaded on first use (the real network is https, where node:tls loads anyway).
// Each client is bundled as the helper is (esbuild, CommonJS) and run alternately, so load affects both.
import fs from 'node:fs';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { build } from 'esbuild';
import { makeCertificate } from 'knotless-devnet';
import { run } from './client.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '30' } } });
const runs = Number(values.runs);
const clients = { 'hand-written Http1Pool': 'hand', 'node:https, loaded lazily': 'https' } as const;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-tls-start-'));
const cert = makeCertificate();
const server = https.createServer({ key: cert.key, cert: cert.cert }, (_req, res) =>
  res.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
);
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as net.AddressInfo).port;
try {
  const bundles: Record<string, string> = {};
  for (const [label, name] of Object.entries(clients)) {
    bundles[label] = path.join(dir, `${name}.cjs`);
    await build({
      entryPoints: [path.join(import.meta.dirname, 'tls-start', `${name}.ts`)],
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node22',
      outfile: bundles[label],
      logLevel: 'warning',
    });
  }
  // The server lives in this process, so the clients run asynchronously (a synchronous spawn would
  // leave nobody to answer them).
  const env = { PATH: process.env['PATH'] ?? '', TLS_START_PORT: String(port), TLS_START_CA: cert.certFile };
  const samples: Record<string, { done: number[]; cpu: number[] }> = {};
  for (let i = 0; i < runs + 2; i++) {
    for (const [label, file] of Object.entries(bundles)) {
      const out = await run(process.execPath, [file], { cwd: dir, env });
      const m = /status 200 done at (\d+)ms cpu (\d+)ms/.exec(out.stderr);
      if (m === null) throw new Error(`${label} failed: ${out.stderr}`);
      if (i < 2) continue; // warm-up: the page cache, not the client
      const s = (samples[label] ??= { done: [], cpu: [] });
      s.done.push(Number(m[1]));
      s.cpu.push(Number(m[2]));
    }
  }
  console.log(
    `https client start-up, ${new Date().toISOString()}, ${os.cpus().length} cores, Node ${process.version}`,
  );
  console.log(`npm run bench:tls -- --runs ${runs}`);
  console.log('');
  console.log('| one https GET | p50 ms to answer | p95 ms | p50 cpu ms |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const [label, s] of Object.entries(samples))
    console.log(
      `| ${label} | ${percentile(s.done, 50)} | ${percentile(s.done, 95)} | ${percentile(s.cpu, 50)} |`,
    );
} finally {
  server.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
