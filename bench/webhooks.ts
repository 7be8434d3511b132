// `npm run bench:webhooks`: how long after `git push` returns a webhook's receiver has the push
// event, on the dev network (its PDS, the appview following its stream in dev mode, a receiver on
// loopback). 20 one-commit pushes by default; prints p50, p95 and the slowest, and the load. An
// event counts as arrived only once its X-Knotless-Signature-256 verifies with the webhook's secret,
// as a receiver would check it; one that does not stops the bench.
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startAppview } from '../packages/knotless-serve/src/appview.ts';
import { defaultConfig } from '../packages/knotless-serve/src/config.ts';
import { makeClient, run } from './client.ts';
import { startRig } from './setup.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({
  options: { pushes: { type: 'string', default: '20' }, json: { type: 'string' } },
});
const PUSHES = Number(values.pushes);

/** When the receiver got the push event whose `after` is each commit. */
const arrived = new Map<string, number>();
const waiting = new Map<string, () => void>();
const secret = crypto.randomBytes(32).toString('hex');
let forged: string | undefined;
const receiver = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const got = Buffer.from(String(req.headers['x-knotless-signature-256'] ?? ''));
    const want = Buffer.from(`sha256=${crypto.createHmac('sha256', secret).update(body).digest('hex')}`);
    const verified = got.length === want.length && crypto.timingSafeEqual(got, want);
    const at = performance.now();
    res.writeHead(204).end();
    if (req.headers['x-knotless-event'] !== 'push') return;
    const after = (JSON.parse(body.toString('utf8')) as { after: string }).after;
    if (!verified) forged ??= after;
    arrived.set(after, at);
    waiting.get(after)?.();
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

const rig = await startRig([0], true);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-webhooks-'));
const app = await startAppview(
  {
    ...defaultConfig(tmp),
    port: 0,
    plcUrl: rig.net.plcUrl,
    firehoses: [rig.net.pdsUrl.replace(/^http/, 'ws')],
    dev: true,
  },
  () => undefined,
);
try {
  const client = await makeClient(rig, true);
  const env = client.env(0);
  await client.knotless(0, ['repo', 'create', 'hooked']);
  let owner = (await app.index.owner('alice.test'))?.did;
  for (let i = 0; owner === undefined || (await app.index.repo(owner, 'hooked')) === undefined; i++) {
    if (i > 1200) throw new Error('the appview did not index the repository within 60 s');
    await new Promise((r) => setTimeout(r, 50));
    owner = (await app.index.owner('alice.test'))?.did;
  }
  await app.index.webhooks.add(owner, 'hooked', hookUrl, secret);
  const work = path.join(client.home, 'work');
  fs.mkdirSync(work);
  await run('git', ['init', '-q', '-b', 'main'], { cwd: work, env });
  await run('git', ['remote', 'add', 'origin', 'knotless://alice.test/hooked'], { cwd: work, env });
  const lags: number[] = [];
  // The first push makes the repository's mirror; it is not counted.
  for (let i = 0; i <= PUSHES; i++) {
    fs.writeFileSync(path.join(work, 'n.txt'), `push ${i}\n`);
    await run('git', ['add', 'n.txt'], { cwd: work, env });
    await run('git', ['commit', '-qm', `push ${i}`], { cwd: work, env });
    const oid = (await run('git', ['rev-parse', 'HEAD'], { cwd: work, env })).stdout.trim();
    const got = new Promise<void>((r) => waiting.set(oid, r));
    await run('git', ['push', '-q', 'origin', 'main'], { cwd: work, env });
    const returned = performance.now();
    await got;
    if (forged !== undefined)
      throw new Error(`the push event for ${forged} arrived with a signature that does not verify`);
    if (i > 0) lags.push(arrived.get(oid)! - returned);
  }
  lags.sort((a, b) => a - b);
  const load = os.loadavg();
  if (values.json !== undefined) {
    const result = {
      pushes: lags.length,
      signatures_verified: true,
      p50_ms: Math.round(percentile(lags, 50)),
      p95_ms: Math.round(percentile(lags, 95)),
      max_ms: Math.round(lags.at(-1)!),
      loadavg: load,
    };
    fs.writeFileSync(values.json, JSON.stringify(result, null, 2) + '\n');
  }
  process.stdout.write(
    `webhook push events, ${lags.length} pushes (git push returned → the receiver has the event): ` +
      `p50 ${percentile(lags, 50).toFixed(0)} ms, p95 ${percentile(lags, 95).toFixed(0)} ms, ` +
      `max ${lags.at(-1)!.toFixed(0)} ms, every signature verified; load average ${load
        .map((l) => l.toFixed(1))
        .join(' ')}\n`,
  );
} finally {
  await app.close();
  await rig.close();
  await new Promise((r) => receiver.close(r));
  fs.rmSync(tmp, { recursive: true, force: true });
}
