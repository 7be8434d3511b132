// `npm run bench:team-listing [-- --maintainers 50 --runs 5]`: what a reader pays to list a repository
// whose owner names N maintainers, each of whom has pushed a branch of their own to it (format.md,
// "Teams"): a `git ls-remote` with a fresh cache (every maintainer's DID document read from the PLC
// directory) and with a warm one (identities cached, as on a machine that read it before), without an
// agent. The listing reads the owner's table, then every maintainer's table in parallel, each with
// its proof. Requests are those the PDS and the PLC directory answered, each counted by a proxy in
// front of it; `ms` is the command's wall time, `cpu_ms` that of its process tree (GNU time). Every
// account is on the one PDS, and the network runs in this process: its work is not in `cpu_ms`.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork, startProxy } from 'knotless-devnet';
import { run, runMeasured } from './client.ts';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { knotlessBin, localEnv } from './local.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '5' }, maintainers: { type: 'string', default: '50' } },
});
const runs = Number(values.runs);
const count = Number(values.maintainers);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-team-listing-'));
const net = await startNetwork({ dir: path.join(dir, 'net') });
const pds = await startProxy({ target: net.pdsUrl });
const plc = await startProxy({ target: net.plcUrl });
try {
  const bin = knotlessBin(dir);
  const base = {
    ...localEnv(dir, bin, { plcUrl: plc.url, pdsUrl: pds.url }),
    KNOTLESS_SERVICE: pds.url,
    KNOTLESS_AGENT: '0',
    KNOTLESS_COMPACT: '0',
  };
  /** One account's own configuration and cache: logged in as it. */
  const as = (handle: string) => ({
    ...base,
    KNOTLESS_CONFIG_DIR: path.join(dir, `config-${handle}`),
    KNOTLESS_CACHE_DIR: path.join(dir, `cache-${handle}`),
  });
  const knotless = (args: string[], env: Record<string, string>) =>
    run(process.execPath, [BIN_SCRIPTS['knotless']!, ...args], { cwd: dir, env });
  const handles = Array.from({ length: count }, (_, i) => `m${String(i).padStart(2, '0')}.test`);
  for (const h of ['alice.test', ...handles]) {
    await net.ensureAccount(h, 'bench-password');
    await knotless(['login', h, '--app-password', 'bench-password'], as(h));
  }
  const owner = as('alice.test');
  await knotless(['repo', 'create', 'team'], owner);
  const url = 'knotless://alice.test/team';
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const o = { cwd: work, env: owner };
  await run('git', ['init', '-q', '-b', 'main'], o);
  fs.writeFileSync(path.join(work, 'a.txt'), 'a\n');
  await run('git', ['add', '-A'], o);
  await run('git', ['commit', '-q', '-m', 'a'], o);
  await run('git', ['push', '-q', url, 'main'], o);
  for (const h of handles) await knotless(['repo', 'maintainer', 'add', 'team', h], owner);
  // Each maintainer pushes a branch of their own: a table of theirs that every listing reads.
  for (const h of handles)
    await run('git', ['push', '-q', url, `main:refs/heads/${h.split('.')[0]!}`], { cwd: work, env: as(h) });

  const rows: Record<string, { ms: number[]; cpu: number[]; pds: number[]; plc: number[] }> = {};
  const loadBefore = os.loadavg();
  const reader = { ...base, KNOTLESS_CONFIG_DIR: path.join(dir, 'config-reader') };
  let listed = 0;
  for (let i = 0; i < runs + 1; i++) {
    for (const kind of ['cold', 'warm'] as const) {
      const cache = path.join(dir, kind === 'cold' ? `cache-reader-${i}` : 'cache-reader-warm');
      pds.reset();
      plc.reset();
      const t = await runMeasured('git', ['ls-remote', url], {
        cwd: dir,
        env: { ...reader, KNOTLESS_CACHE_DIR: cache },
        home: dir,
      });
      listed = t.stdout.trim().split('\n').length;
      // The first of each is a warm-up (and fills the warm cache).
      if (i === 0) continue;
      const row = (rows[kind] ??= { ms: [], cpu: [], pds: [], plc: [] });
      row.ms.push(t.ms);
      row.cpu.push(t.cpuMs ?? 0);
      row.pds.push(pds.count());
      row.plc.push(plc.count());
    }
  }
  const r = (n: number) => Math.round(n * 10) / 10;
  console.log(
    JSON.stringify(
      {
        command: `npm run bench:team-listing -- --runs ${runs} --maintainers ${count}`,
        date: new Date().toISOString(),
        machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}`,
        node: process.version,
        loadavg_before: loadBefore.map(r),
        loadavg_after: os.loadavg().map(r),
        maintainers: count,
        refs_listed: listed,
        results: Object.fromEntries(
          Object.entries(rows).map(([k, v]) => [
            k,
            {
              ms_p50: Math.round(percentile(v.ms, 50)),
              cpu_ms_p50: Math.round(percentile(v.cpu, 50)),
              pds_requests_p50: percentile(v.pds, 50),
              plc_requests_p50: percentile(v.plc, 50),
            },
          ]),
        ),
      },
      null,
      2,
    ),
  );
} finally {
  await pds.close();
  await plc.close();
  await net.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
