// `npm run bench:appview`: page latency and ingest lag of the appview on a generated repository
// (10,000 commits and 4,000 refs by default), with a warm mirror. Prints p50/p95 per page and how
// long after the PDS's commit (the helper's push returning) the appview shows a push.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startAppview } from '../packages/knotless-serve/src/appview.ts';
import { defaultConfig } from '../packages/knotless-serve/src/config.ts';
import { makeClient, run } from './client.ts';
import { startRig } from './setup.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({
  options: {
    commits: { type: 'string', default: '10000' },
    refs: { type: 'string', default: '4000' },
    requests: { type: 'string', default: '40' },
    pushes: { type: 'string', default: '5' },
  },
});
const COMMITS = Number(values.commits);
const REFS = Number(values.refs);
const REQUESTS = Number(values.requests);

/** A fast-import stream: COMMITS commits over 40 directories of 10 files, then REFS branches and tags. */
function history(): string {
  const out: string[] = [];
  const t0 = 1_600_000_000;
  for (let i = 1; i <= COMMITS; i++) {
    out.push(
      `commit refs/heads/main\nmark :${i}\ncommitter Bench <bench@example.com> ${t0 + i * 60} +0000\n`,
    );
    const msg = `change ${i}: touch a few files\n`;
    out.push(`data ${Buffer.byteLength(msg)}\n${msg}`);
    if (i > 1) out.push(`from :${i - 1}\n`);
    for (let k = 0; k < (i === 1 ? 400 : 3); k++) {
      const f = i === 1 ? k : (i * 7 + k * 131) % 400;
      const body = `file ${f}\nrevision ${i}\n${'line of text\n'.repeat(20 + (f % 50))}`;
      out.push(
        `M 100644 inline dir${String(f % 40).padStart(2, '0')}/file${f}.txt\ndata ${Buffer.byteLength(body)}\n${body}`,
      );
    }
  }
  for (let r = 0; r < REFS; r++) {
    const at = Math.max(1, COMMITS - ((r * 2503) % COMMITS));
    const ref = r % 2 === 0 ? `refs/heads/feature/b${r}` : `refs/tags/v${r}`;
    out.push(`reset ${ref}\nfrom :${at}\n\n`);
  }
  return out.join('');
}

const rig = await startRig([0], true);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-appview-'));
const app = await startAppview(
  {
    ...defaultConfig(tmp),
    port: 0,
    plcUrl: rig.net.plcUrl,
    firehoses: [rig.net.pdsUrl.replace(/^http/, 'ws')],
    dev: true,
    publicUrl: 'http://appview.invalid',
  },
  () => undefined,
);
try {
  const client = await makeClient(rig, true);
  const src = path.join(client.home, 'gen.git');
  await run('git', ['init', '-q', '--bare', src], { cwd: client.home, env: client.env(0) });
  fs.writeFileSync(path.join(client.home, 'stream'), history());
  await run('sh', ['-c', `git --git-dir=${src} fast-import --quiet < stream`], {
    cwd: client.home,
    env: client.env(0),
  });
  await run('git', ['--git-dir', src, 'repack', '-a', '-d', '-q'], { cwd: client.home, env: client.env(0) });
  await client.knotless(0, ['repo', 'create', 'gen']);
  process.stderr.write(`pushing ${COMMITS} commits and ${REFS + 1} refs\n`);
  const pushed = await run('git', ['push', '-q', '--mirror', 'knotless://alice.test/gen'], {
    cwd: src,
    env: client.env(0),
  });
  process.stderr.write(`pushed in ${(pushed.ms / 1000).toFixed(1)} s; waiting for the mirror\n`);
  const api = `${app.url}/xrpc/dev.knotless.getRepo?actor=alice.test&repo=gen`;
  const started = performance.now();
  for (;;) {
    const r = await fetch(api);
    if (r.ok && ((await r.json()) as { refs: unknown[] }).refs.length >= REFS + 1) break;
    if (performance.now() - started > 30 * 60_000)
      throw new Error('the appview did not index every ref in 30 min');
    await new Promise((res) => setTimeout(res, 250));
  }
  await app.idle();
  const indexedS = (performance.now() - started) / 1000;

  // Ingest lag: a one-commit push to main, from the helper's push returning (the PDS has committed)
  // to the appview's answer naming the new commit.
  const work = path.join(client.home, 'work');
  await run('git', ['clone', '-q', '--branch', 'main', '--single-branch', src, work], {
    cwd: client.home,
    env: client.env(0),
  });
  await run('git', ['remote', 'set-url', 'origin', 'knotless://alice.test/gen'], {
    cwd: work,
    env: client.env(0),
  });
  const lags: number[] = [];
  for (let i = 0; i < Number(values.pushes); i++) {
    fs.writeFileSync(path.join(work, 'lag.txt'), `push ${i}\n`);
    await run('git', ['add', 'lag.txt'], { cwd: work, env: client.env(0) });
    await run('git', ['commit', '-qm', `lag ${i}`], { cwd: work, env: client.env(0) });
    const oid = (await run('git', ['rev-parse', 'HEAD'], { cwd: work, env: client.env(0) })).stdout.trim();
    await run('git', ['push', '-q', 'origin', 'main'], { cwd: work, env: client.env(0) });
    const t = performance.now();
    for (;;) {
      const page = await fetch(`${app.url}/alice.test/gen/commits/main`);
      if ((await page.text()).includes(oid)) break;
      if (performance.now() - t > 60_000) throw new Error('a push did not show within 60 s');
      await new Promise((res) => setTimeout(res, 20));
    }
    lags.push(performance.now() - t);
  }
  await app.idle();

  const head = (await run('git', ['rev-parse', 'HEAD'], { cwd: work, env: client.env(0) })).stdout.trim();
  const old = (
    await run('git', ['rev-parse', `HEAD~${Math.floor(COMMITS / 2)}`], { cwd: work, env: client.env(0) })
  ).stdout.trim();
  const base = '/alice.test/gen';
  const pages: [string, string][] = [
    ['home', '/'],
    ['repository', base],
    ['tree (directory)', `${base}/tree/main/dir07`],
    ['file', `${base}/blob/main/dir07/file7.txt`],
    ['raw', `${base}/raw/main/dir07/file7.txt`],
    ['log', `${base}/commits/main`],
    ['log, page 100', `${base}/commits/main?page=100`],
    ['commit', `${base}/commit/${head}`],
    [`compare (${Math.floor(COMMITS / 2)} commits apart)`, `${base}/compare/${old}...main`],
    ['branches', `${base}/branches`],
    ['branches, page 20', `${base}/branches?page=20`],
    ['tags', `${base}/tags`],
    ['file history', `${base}/history/main/dir07/file7.txt`],
    ['blame', `${base}/blame/main/dir07/file7.txt`],
    ['atom', `${base}/atom`],
  ];
  console.log(
    `appview bench, ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`,
  );
  console.log(`npm run bench:appview -- ${process.argv.slice(2).join(' ')}`);
  console.log(
    `${COMMITS} commits, ${REFS + 1} refs; push ${(pushed.ms / 1000).toFixed(1)} s, all refs indexed and mirrored ${indexedS.toFixed(1)} s after`,
  );
  console.log('');
  console.log(`| page | first ms | p50 ms | p95 ms | bytes |`);
  console.log(`| --- | ---: | ---: | ---: | ---: |`);
  for (const [name, url] of pages) {
    const times: number[] = [];
    let bytes = 0;
    let first = 0;
    for (let i = 0; i <= REQUESTS; i++) {
      const t = performance.now();
      const res = await fetch(`${app.url}${url}`);
      const body = await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
      // The first request warms the mirror's caches (and the OS's): it is not counted.
      if (i > 0) times.push(performance.now() - t);
      else first = performance.now() - t;
      bytes = body.byteLength;
    }
    times.sort((a, b) => a - b);
    console.log(
      `| ${name} | ${first.toFixed(0)} | ${percentile(times, 50).toFixed(1)} | ${percentile(times, 95).toFixed(1)} | ${bytes} |`,
    );
  }
  lags.sort((a, b) => a - b);
  console.log('');
  console.log(
    `ingest lag (push returned → appview page shows the commit), ${lags.length} pushes: ` +
      `median ${percentile(lags, 50).toFixed(0)} ms, max ${lags.at(-1)!.toFixed(0)} ms`,
  );
} finally {
  await app.close();
  await rig.close();
}
