// `npm run bench:ingest -- [--json FILE] [--rates 5000,10000,15000] [--seconds 10] [--accounts 100000]
// [--poll-ms 10]`:
// drives a real appview (the installed bundle, its own process, SQLite) with a synthetic relay stream
// at rising rates and reports the highest it sustained. See docs/reference/performance.md.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import Sqlite from 'better-sqlite3';
import { startNetwork, startProxy } from 'knotless-devnet';
import { cachedNetworkFrames, setSeq, type ReadyFrame } from './ingest/frames.ts';
import { knotlessWriter, type KnotlessFrame } from './ingest/knotless.ts';
import { startBenchRelay } from './ingest/stream-server.ts';
import { stageFigures, TraceLines, type Checked } from './ingest/stages.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({
  options: {
    json: { type: 'string' },
    rates: { type: 'string', default: '5000,10000,15000,20000' },
    seconds: { type: 'string', default: '10' },
    accounts: { type: 'string', default: '100000' },
    'knotless-per-mille': { type: 'string', default: '1' },
    'poll-ms': { type: 'string', default: '10' },
  },
});
const RATES = values.rates.split(',').map(Number);
/**
 * How often a knotless record's page is asked for until it shows the record. Each ask is a page the
 * appview renders beside the stream, so the figure is at most this much late, never early.
 */
const POLL_MS = Number(values['poll-ms']);
const SECONDS = Number(values.seconds);
const ACCOUNTS = Number(values.accounts);
const PER_MILLE = Number(values['knotless-per-mille']);
const log = (line: string): void => void process.stderr.write(`bench:ingest: ${line}\n`);

// The bench runs its own network: a shell that sourced a dev network's env file names that
// network's PLC, PDS, appview and folders, which the knotless CLI (its writer) and the appview would
// otherwise act on. No KNOTLESS_* variable is the bench's input.
for (const name of Object.keys(process.env)) if (name.startsWith('KNOTLESS_')) delete process.env[name];

/** What the bench started, stopped in reverse order on every way out: the end, a failure, a signal. */
const started: Array<{ what: string; stop: () => unknown }> = [];
let stopping: Promise<void> | undefined;
function stopAll(): Promise<void> {
  stopping ??= (async () => {
    for (const { what, stop } of started.reverse()) {
      try {
        await stop();
      } catch (err) {
        // Stopping goes on: what comes after must be stopped too.
        log(`stopping ${what} failed: ${String(err)}`);
      }
    }
  })();
  return stopping;
}
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const)
  process.on(signal, () => void stopAll().then(() => process.exit(code)));

let db: Sqlite.Database | undefined;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-ingest-'));
started.push({ what: 'its folder', stop: () => fs.rmSync(dir, { recursive: true, force: true }) });
try {
  const net = await startNetwork({ dir: path.join(dir, 'net') });
  started.push({ what: 'the network', stop: () => net.close() });
  const password = 'bench-password';
  // Every DID the appview resolves goes through this proxy: counted, and checked to be knotless ones.
  const plc = await startProxy({ target: net.plcUrl });
  started.push({ what: 'the PLC proxy', stop: () => plc.close() });
  const relay = await startBenchRelay();
  started.push({ what: 'the relay', stop: () => relay.close() });

  log(`making ${ACCOUNTS} accounts' signed frames`);
  const t0 = performance.now();
  // Kept between runs (the frames are the same for the same number of accounts, but for their keys);
  // `-atcrypto`: signed with @atproto/crypto (older files, signed with OpenSSL, are not read).
  const cacheFile = path.resolve(
    import.meta.dirname,
    `../node_modules/.cache/knotless-bench-ingest/frames-${ACCOUNTS}-atcrypto.bin`,
  );
  const pool: ReadyFrame[] = await cachedNetworkFrames(cacheFile, ACCOUNTS, ACCOUNTS, (n) =>
    log(`${n} frames made`),
  );
  log(`made ${pool.length} frames in ${Math.round(performance.now() - t0)} ms`);

  const serveBin = path.resolve(import.meta.dirname, '../packages/knotless-serve/bin/knotless-serve.cjs');
  const dataDir = path.join(dir, 'appview');
  const child = spawn(
    process.execPath,
    [serveBin, '--firehose', relay.url, '--plc', plc.url, '--dev', '--data', dataDir, '--port', '0'],
    // Traced: each knotless record's stages are timed (see ./ingest/stages.ts).
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, KNOTLESS_SERVE_TRACE: '1' } },
  );
  const childExit = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  started.push({
    what: 'the appview',
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await childExit;
    },
  });
  // Whatever way this process ends, even one that skips the stops above, the appview ends with it.
  process.on('exit', () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stderr = '';
  const traces = new TraceLines();
  const appUrl = await new Promise<string>((resolve, reject) => {
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr = (stderr + traces.feed(d)).slice(-100_000);
      const m = /listening on (http:\/\/\S+)/.exec(stderr);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`knotless-serve exited ${code}: ${stderr}`)));
  });
  const pid = child.pid!;

  function cpuMs(): number {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime + stime, in clock ticks of 10 ms
  }
  function rssMiB(): number {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return Number(m?.[1] ?? 0) / 1024;
  }
  function cursor(): number {
    db ??= new Sqlite(path.join(dataDir, 'index.sqlite'), { readonly: true, fileMustExist: true });
    const row = db.prepare('select seq from cursors where service = ?').get(relay.url) as
      { seq: number } | undefined;
    return row === undefined ? 0 : Number(row.seq);
  }

  interface StepResult {
    rate: number;
    events: number;
    knotless: number;
    send_seconds: number;
    kept_pace: boolean;
    caught_up_ms: number;
    sustained: boolean;
    events_per_second: number;
    cpu_ms_per_1000_events: number;
    rss_mib: number;
    knotless_visible_p50_ms: number;
    knotless_visible_p95_ms: number;
    knotless_visible_max_ms: number;
    load_average: number[];
    /** Page requests the bench made to see the knotless records: load it adds to the appview. */
    page_polls: number;
    /** Per kind of write, each stage's p50/p95 (ms): where the time to the page went. */
    stages: ReturnType<typeof stageFigures>;
  }

  const writer = await knotlessWriter(net, path.join(dir, 'writer'), password);
  let seq = 100_000;
  let poolAt = 0;
  const results: StepResult[] = [];
  for (const rate of RATES) {
    const events = Math.round(rate * SECONDS);
    const wanted = Math.max(1, Math.round((events * PER_MILLE) / 1000));
    log(`rate ${rate}: writing ${wanted} knotless records to the PDS first`);
    const kf = await writer.frames(wanted);
    // The knotless frames spread evenly among the network's.
    const every = Math.floor(events / kf.length);
    const order: { frame: ReadyFrame; check?: KnotlessFrame['check'] }[] = [];
    let k = 0;
    for (let i = 0; i < events; i++) {
      if (k < kf.length && i % every === every - 1) order.push(kf[k++]!);
      else order.push({ frame: pool[poolAt++ % pool.length]! });
    }
    while (k < kf.length) order.push(kf[k++]!);
    // Each frame's bytes are copied with its number, before the clock starts.
    const bytes = order.map((o) => Buffer.from(setSeq(o.frame, ++seq)));
    const last = seq;

    const visible: number[] = [];
    let polls = 0;
    const checked: Checked[] = [];
    const pending: Promise<void>[] = [];
    const epoch = (t: number): number => performance.timeOrigin + t;
    const watch = (check: NonNullable<KnotlessFrame['check']>, i: number, sentAt: number): Promise<void> =>
      (async () => {
        for (;;) {
          polls++;
          const res = await fetch(`${appUrl}${check.page}`);
          const text = await res.text();
          if (res.status === 200 && text.includes(check.text)) break;
          await new Promise((r) => setTimeout(r, POLL_MS));
        }
        const at = performance.now();
        visible.push(at - sentAt);
        const repo = /^\/alice\.test\/([^/]+)/.exec(check.page)?.[1];
        checked.push({
          kind: check.kind,
          seq: last - bytes.length + 1 + i,
          mirrorKey: check.kind === 'push' && repo !== undefined ? `${writer.did}/${repo}` : undefined,
          sentAt: epoch(sentAt),
          visibleAt: epoch(at),
        });
      })();
    let rss = rssMiB();
    const sampler = setInterval(() => (rss = Math.max(rss, rssMiB())), 200);
    const cpu0 = cpuMs();
    const { startedAt, endedAt } = await relay.run({
      frames: bytes,
      rate,
      sent: (i, at) => {
        const c = order[i]!.check;
        if (c !== undefined) pending.push(watch(c, i, at));
      },
    });
    while (cursor() < last) await new Promise((r) => setTimeout(r, 50));
    const caughtUp = performance.now() - endedAt;
    await Promise.all(pending);
    clearInterval(sampler);
    const cpu = cpuMs() - cpu0;
    const sendSeconds = (endedAt - startedAt) / 1000;
    // Kept pace: the sender was never held back past 5 %; caught up: every event indexed within the
    // cursor's save interval (1 s) and one more second of the stream.
    const keptPace = sendSeconds <= SECONDS * 1.05;
    const r: StepResult = {
      rate,
      events: bytes.length,
      knotless: kf.length,
      send_seconds: Number(sendSeconds.toFixed(2)),
      kept_pace: keptPace,
      caught_up_ms: Math.round(caughtUp),
      sustained: keptPace && caughtUp <= 2000,
      events_per_second: Math.round(bytes.length / sendSeconds),
      cpu_ms_per_1000_events: Number(((cpu * 1000) / bytes.length).toFixed(1)),
      rss_mib: Math.round(rss),
      knotless_visible_p50_ms: Math.round(percentile(visible, 50)),
      knotless_visible_p95_ms: Math.round(percentile(visible, 95)),
      knotless_visible_max_ms: Math.round(Math.max(...visible)),
      load_average: os.loadavg().map((l) => Number(l.toFixed(1))),
      page_polls: polls,
      stages: stageFigures(checked, traces),
    };
    results.push(r);
    log(JSON.stringify(r));
    if (!r.sustained) break;
  }

  const resolved = plc.requests
    .map((q) => decodeURIComponent(q.path.slice(1)))
    .filter((p) => p.startsWith('did:'));
  const knotlessDids = new Set([writer.did]);
  const best = [...results].reverse().find((r) => r.sustained) ?? results[0]!;
  const report = {
    events_per_second: best.sustained ? best.events_per_second : 0,
    cpu_ms_per_1000_events: best.cpu_ms_per_1000_events,
    rss_mib: Math.max(...results.map((r) => r.rss_mib)),
    knotless_visible_p95_ms: best.knotless_visible_p95_ms,
    did_resolutions: resolved.length,
    did_resolutions_of_other_accounts: resolved.filter((d) => !knotlessDids.has(d)).length,
    accounts: ACCOUNTS,
    frames_in_pool: pool.length,
    cores: os.cpus().length,
    load_average: os.loadavg().map((l) => Number(l.toFixed(1))),
    steps: results,
  };
  const out = JSON.stringify(report, null, 2);
  if (values.json !== undefined) fs.writeFileSync(values.json, out + '\n');
  process.stdout.write(out + '\n');
} finally {
  db?.close();
  await stopAll();
}
