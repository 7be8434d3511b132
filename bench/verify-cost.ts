// `npm run bench:verify-cost [-- --runs 5 --refs 200]`: what verifying a repository of 200 refs
// costs, on a ref table and on ref records: `knotless verify`, a cold `git fetch` (a fresh cache, no
// agent, nothing new to fetch: the listing and its checks), a warm one without an agent (the cache of
// a machine that fetched before) and one through a running agent that read the repository before, each with verification on and with `KNOTLESS_VERIFY=0`
// (`knotless verify` only on: it is the check itself). Requests and answer bytes are those the PDS
// and the PLC directory answered, each counted by a proxy in front of it (the agent's requests too);
// `ms` is the command's wall time, `cpu_ms` that of its process tree (GNU time; the agent's own CPU
// is not in it). The network runs in this process; the machine's load is printed with the figures.
// `table_listing_cpu` is the CPU of one verified listing of the table alone, read `--runs` 50 times in
// a reader process of its own (bench/verify-cpu.ts): the first read, which loads the proofs' libraries,
// and the median of the others, verified and not; `records_listing_cpu` the same of one proved listing
// of the ref records (bench/verify-cpu-records.ts, through a repository opened afresh each time).
// `--rtt N` puts a link charging N ms a round trip (and one for each new connection) between the
// measured commands and the PDS: the round trips verification adds are the difference of a row's
// `ms` from its `KNOTLESS_VERIFY=0` row, over N.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startDelayLink, startNetwork, startProxy } from 'knotless-devnet';
import { run, runMeasured } from './client.ts';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { knotlessBin, localEnv, startAgentProcess } from './local.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    refs: { type: 'string', default: '200' },
    rtt: { type: 'string', default: '0' },
  },
});
const runs = Number(values.runs);
const refs = Number(values.refs);
const rtt = Number(values.rtt);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-verify-cost-'));
const net = await startNetwork({ dir: path.join(dir, 'net') });
const pds = await startProxy({ target: net.pdsUrl });
const plc = await startProxy({ target: net.plcUrl });
const link =
  rtt > 0
    ? await startDelayLink({ target: { host: '127.0.0.1', port: Number(new URL(pds.url).port) }, rttMs: rtt })
    : undefined;
/** Where the measured commands reach the PDS: through the link when there is one. */
const measuredService = link === undefined ? pds.url : `http://127.0.0.1:${link.port}`;
const agents: Array<{ kill(): boolean }> = [];
try {
  const { did } = await net.ensureAccount('alice.test', 'bench-password');
  const bin = knotlessBin(dir);
  const base = {
    ...localEnv(dir, bin, { plcUrl: plc.url, pdsUrl: pds.url }),
    KNOTLESS_SERVICE: pds.url,
    KNOTLESS_AGENT: '0',
    KNOTLESS_COMPACT: '0',
  };
  const knotless = (args: string[], env = base) =>
    run(process.execPath, [BIN_SCRIPTS['knotless']!, ...args], { cwd: dir, env });
  await knotless(['login', 'alice.test', '--app-password', 'bench-password']);

  type Row = {
    ms: number[];
    cpu: number[];
    pds: number[];
    pdsBytes: number[];
    plc: number[];
    nsids: Record<string, number>;
  };
  const results: Record<string, Row> = {};
  /** The CPU of one verified listing of the table, in a reader process of its own (bench/verify-cpu.ts). */
  let listingCpu: unknown;
  /** The same of one proved listing of ref records (bench/verify-cpu-records.ts). */
  let recordsListingCpu: unknown;
  const note = (key: string, t: { ms: number; cpuMs?: number }) => {
    const row = (results[key] ??= { ms: [], cpu: [], pds: [], pdsBytes: [], plc: [], nsids: {} });
    row.ms.push(t.ms);
    row.cpu.push(t.cpuMs ?? 0);
    row.pds.push(pds.count());
    row.pdsBytes.push(pds.bytes());
    row.plc.push(plc.count());
    for (const r of pds.requests) row.nsids[r.nsid ?? r.path] = (row.nsids[r.nsid ?? r.path] ?? 0) + 1 / runs;
  };
  const loadBefore = os.loadavg();

  for (const layout of ['table', 'records'] as const) {
    const name = `many-${layout}`;
    const url = `knotless://alice.test/${name}`;
    const env = { ...base, KNOTLESS_REF_TABLE: layout === 'table' ? '1' : '0' };
    await knotless(['repo', 'create', name], env);
    const work = path.join(dir, `work-${layout}`);
    fs.mkdirSync(work);
    const o = { cwd: work, env };
    await run('git', ['init', '-q', '-b', 'main'], o);
    fs.writeFileSync(path.join(work, 'a.txt'), 'a\n');
    await run('git', ['add', '-A'], o);
    await run('git', ['commit', '-q', '-m', 'a'], o);
    const branches = Array.from(
      { length: refs - 1 },
      (_, i) => `main:refs/heads/b${String(i).padStart(4, '0')}`,
    );
    await run('git', ['push', '-q', url, 'main', ...branches], o);
    if (layout === 'table') {
      const args = ['--pds', net.pdsUrl, '--plc', net.plcUrl, '--did', did, '--name', name, '--runs', '50'];
      const child = await run(process.execPath, [path.join(import.meta.dirname, 'verify-cpu.ts'), ...args], {
        cwd: dir,
        env: base,
      });
      listingCpu = JSON.parse(child.stdout);
    } else {
      const args = ['--did', did, '--name', name, '--runs', '50'];
      const child = await run(
        process.execPath,
        [path.join(import.meta.dirname, 'verify-cpu-records.ts'), ...args],
        { cwd: dir, env },
      );
      recordsListingCpu = JSON.parse(child.stdout);
    }
    const clone = path.join(dir, `clone-${layout}`);
    await run('git', ['clone', '-q', url, clone], { cwd: dir, env });

    // A warm agent of its own, on the reader's cache, read the repository once before.
    const socket = path.join(dir, `agent-${layout}.sock`);
    const warmCache = path.join(dir, `cache-warm-${layout}`);
    const { KNOTLESS_AGENT: off, ...withAgent } = env;
    void off;
    const agentEnv: Record<string, string> = {
      ...withAgent,
      KNOTLESS_AGENT_SOCKET: socket,
      KNOTLESS_CACHE_DIR: warmCache,
    };
    agents.push(await startAgentProcess(socket, agentEnv));
    await run('git', ['fetch', '-q', 'origin'], { cwd: clone, env: agentEnv });

    for (let i = 0; i < runs + 1; i++) {
      for (const verify of ['on', 'off'] as const) {
        const v = verify === 'off' ? { KNOTLESS_VERIFY: '0' } : {};
        const measure = async (
          what: string,
          cmd: string,
          args: string[],
          cwd: string,
          e: Record<string, string>,
        ) => {
          pds.reset();
          plc.reset();
          const t = await runMeasured(cmd, args, {
            cwd,
            env: { ...e, KNOTLESS_SERVICE: measuredService },
            home: dir,
          });
          if (i > 0) note(`${layout} ${what}${verify === 'off' ? ', KNOTLESS_VERIFY=0' : ''}`, t);
        };
        const cold = { ...env, ...v, KNOTLESS_CACHE_DIR: path.join(dir, `cache-${layout}-${verify}-${i}`) };
        if (verify === 'on')
          await measure(
            'knotless verify',
            process.execPath,
            [BIN_SCRIPTS['knotless']!, 'verify', `alice.test/${name}`],
            dir,
            cold,
          );
        await measure('cold fetch', 'git', ['fetch', '-q', 'origin'], clone, {
          ...cold,
          KNOTLESS_CACHE_DIR: path.join(dir, `cache-${layout}-${verify}-${i}-fetch`),
        });
        // The same cache each run, the warm-up round's included: what a machine that read the
        // repository before pays without an agent.
        await measure('warm fetch (no agent)', 'git', ['fetch', '-q', 'origin'], clone, {
          ...env,
          ...v,
          KNOTLESS_CACHE_DIR: path.join(dir, `cache-${layout}-${verify}-warm`),
        });
        await measure('warm fetch (agent)', 'git', ['fetch', '-q', 'origin'], clone, { ...agentEnv, ...v });
      }
    }
  }
  const r = (n: number) => Math.round(n * 10) / 10;
  console.log(
    JSON.stringify(
      {
        command: `npm run bench:verify-cost -- --runs ${runs} --refs ${refs}${rtt > 0 ? ` --rtt ${rtt}` : ''}`,
        rtt_ms: rtt,
        date: new Date().toISOString(),
        machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}`,
        node: process.version,
        loadavg_before: loadBefore.map(r),
        loadavg_after: os.loadavg().map(r),
        runs,
        refs,
        table_listing_cpu: listingCpu,
        records_listing_cpu: recordsListingCpu,
        results: Object.fromEntries(
          Object.entries(results).map(([k, s]) => [
            k,
            {
              ms_p50: Math.round(percentile(s.ms, 50)),
              cpu_ms_p50: Math.round(percentile(s.cpu, 50)),
              pds_requests_p50: percentile(s.pds, 50),
              pds_bytes_p50: percentile(s.pdsBytes, 50),
              plc_requests_p50: percentile(s.plc, 50),
              pds_requests_by_method_mean: Object.fromEntries(
                Object.entries(s.nsids).map(([n, c]) => [n, r(c)]),
              ),
            },
          ]),
        ),
      },
      null,
      2,
    ),
  );
} finally {
  for (const a of agents) a.kill();
  await link?.close();
  await pds.close();
  await plc.close();
  await net.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
