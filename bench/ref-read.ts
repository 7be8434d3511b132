// `npm run bench:ref-read [-- --runs 10 --against DIR]`: what a cold read of a repository's refs costs
// the helper: `git ls-remote` and `git clone` of a small repository with a fresh cache each run and no
// agent, so that the helper lists the refs itself. `helper` is the CPU (user + sys) of the helper and
// the git commands it waited for, `total` that of git and everything it waited for, both from bash's
// `times`; `node -e 0` is Node's own start, the floor of any helper. With `--against`, another built
// checkout (say main's) runs the same commands in the same rounds, alternating with this one, so that
// both see the same load. Requests are those the PDS and the PLC directory answered, each counted by
// a proxy in front of it. The network runs in this process and is counted in none of the figures.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork, startProxy } from 'knotless-devnet';
import { run } from './client.ts';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { localEnv } from './local.ts';
import { percentile } from './stats.ts';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '10' }, against: { type: 'string' } },
});
const runs = Number(values.runs);
const here = path.resolve(import.meta.dirname, '..');
const checkouts: Record<string, string> = { this: here };
if (values.against !== undefined) checkouts['against'] = path.resolve(values.against);

const MEASURE = ['"$@" >/dev/null 2>"$KNOTLESS_BENCH_ERR"', 'rc=$?', 'times', 'echo "$rc"'].join('; ');

function seconds(text: string): number {
  const m = /^(\d+)m([\d.]+)s$/.exec(text);
  if (m === null) throw new Error(`bash's times printed ${text}`);
  return Number(m[1]) * 60 + Number(m[2]);
}

/** CPU ms of bash's `times` line `0m0.120s 0m0.030s` (user, sys). */
function cpuMs(line: string): number {
  const [user = '', sys = ''] = line.trim().split(' ');
  return (seconds(user) + seconds(sys)) * 1000;
}

/**
 * CPU ms (user + sys) of `cmd` and the processes it waited for, and of the helper runs among them
 * (their wrapper appends its `times` to a file); fails loudly when the command fails.
 */
async function cpuOf(
  cmd: string[],
  cwd: string,
  env: Record<string, string>,
): Promise<{ total: number; helper: number }> {
  const err = path.join(dir, 'err');
  const times = path.join(dir, 'helper-times');
  fs.rmSync(times, { force: true });
  const out = await run('bash', ['-c', MEASURE, 'measure', ...cmd], {
    cwd,
    env: { ...env, KNOTLESS_BENCH_ERR: err, KNOTLESS_BENCH_TIMES: times },
  });
  const [, children = '', rc = ''] = out.stdout.trim().split('\n');
  if (rc !== '0') throw new Error(`${cmd.join(' ')} exited ${rc}:\n${fs.readFileSync(err, 'utf8')}`);
  const helper = fs.existsSync(times)
    ? fs
        .readFileSync(times, 'utf8')
        .trim()
        .split('\n')
        .filter((_, i) => i % 2 === 1)
        .reduce((sum, line) => sum + cpuMs(line), 0)
    : 0;
  return { total: cpuMs(children), helper };
}

/**
 * `knotless` and `git-remote-knotless` of the built checkout `root` in `bin`; the helper's wrapper
 * appends its CPU (and that of the git commands it waited for) to $KNOTLESS_BENCH_TIMES.
 */
function wrappers(bin: string, root: string): void {
  fs.mkdirSync(bin, { recursive: true });
  const script = (name: string) => path.join(root, 'packages', 'knotless', 'bin', `${name}.cjs`);
  fs.writeFileSync(
    path.join(bin, 'knotless'),
    `#!/bin/sh\nexec '${process.execPath}' '${script('knotless')}' "$@"\n`,
    { mode: 0o755 },
  );
  fs.writeFileSync(
    path.join(bin, 'git-remote-knotless'),
    [
      '#!/bin/bash',
      `'${process.execPath}' '${script('git-remote-knotless')}' "$@"`,
      'rc=$?',
      // `times` prints the shell's own CPU, then its children's: the helper's.
      'times >>"$KNOTLESS_BENCH_TIMES"',
      'exit $rc',
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-ref-read-'));
const net = await startNetwork({ dir: path.join(dir, 'net') });
const pds = await startProxy({ target: net.pdsUrl });
const plc = await startProxy({ target: net.plcUrl });
try {
  await net.ensureAccount('alice.test', 'bench-password');
  const bin = path.join(dir, 'bin');
  wrappers(bin, here);
  const base = {
    ...localEnv(dir, bin, { plcUrl: plc.url, pdsUrl: pds.url }),
    KNOTLESS_SERVICE: pds.url,
    KNOTLESS_AGENT: '0',
    KNOTLESS_COMPACT: '0',
  };
  await run(
    process.execPath,
    [BIN_SCRIPTS['knotless']!, 'login', 'alice.test', '--app-password', 'bench-password'],
    {
      cwd: dir,
      env: base,
    },
  );
  await run(process.execPath, [BIN_SCRIPTS['knotless']!, 'repo', 'create', 'small'], { cwd: dir, env: base });
  const work = path.join(dir, 'work');
  fs.mkdirSync(work);
  const o = { cwd: work, env: base };
  await run('git', ['init', '-q', '-b', 'main'], o);
  for (let i = 0; i < 3; i++) {
    fs.writeFileSync(path.join(work, `f${i}.txt`), `${i}\n`);
    await run('git', ['add', '-A'], o);
    await run('git', ['commit', '-q', '-m', String(i)], o);
  }
  await run(
    'git',
    ['push', '-q', 'knotless://alice.test/small', 'main', 'main:refs/heads/dev', 'main:refs/tags/v1'],
    o,
  );

  const url = 'knotless://alice.test/small';
  type Sample = {
    helper: number[];
    total: number[];
    pds: number[];
    plc: number[];
    nsids: Record<string, number>;
  };
  const sample = (): Sample => ({ helper: [], total: [], pds: [], plc: [], nsids: {} });
  const samples: Record<string, Record<string, Sample>> = {};
  const bins: Record<string, string> = {};
  for (const [name, root] of Object.entries(checkouts)) {
    bins[name] = path.join(dir, `bin-${name}`);
    wrappers(bins[name], root);
    samples[name] = { ls_remote: sample(), clone: sample() };
  }
  const nodeFloor: number[] = [];
  const loadBefore = os.loadavg();
  for (let i = 0; i < runs + 1; i++) {
    const floor = await cpuOf([process.execPath, '-e', '0'], dir, base);
    if (i > 0) nodeFloor.push(floor.total);
    for (const [build, bin] of Object.entries(bins)) {
      for (const name of ['ls_remote', 'clone'] as const) {
        // Cold: a cache of its own each time, so the helper lists the refs from the PDS.
        const env = {
          ...base,
          PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
          KNOTLESS_CACHE_DIR: path.join(dir, `cache-${build}-${name}-${i}`),
        };
        const cmd =
          name === 'ls_remote'
            ? ['git', 'ls-remote', url]
            : ['git', 'clone', '-q', url, path.join(dir, `clone-${build}-${i}`)];
        pds.reset();
        plc.reset();
        const cpu = await cpuOf(cmd, dir, env);
        if (i === 0) continue; // the first round warms the disk cache and the network
        const s = samples[build]![name]!;
        s.helper.push(cpu.helper);
        s.total.push(cpu.total);
        s.pds.push(pds.count());
        s.plc.push(plc.count());
        for (const r of pds.requests) s.nsids[r.nsid ?? r.path] = (s.nsids[r.nsid ?? r.path] ?? 0) + 1 / runs;
      }
    }
  }
  const r = (n: number) => Math.round(n * 10) / 10;
  const commitOf = async (root: string) =>
    (await run('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, env: base })).stdout.trim();
  console.log(
    JSON.stringify(
      {
        command: `npm run bench:ref-read -- --runs ${runs}${values.against === undefined ? '' : ' --against DIR'}`,
        date: new Date().toISOString(),
        machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? ''}`,
        node: process.version,
        loadavg_before: loadBefore.map((l) => r(l)),
        loadavg_after: os.loadavg().map((l) => r(l)),
        runs,
        node_e_0_cpu_ms_p50: r(percentile(nodeFloor, 50)),
        ...Object.fromEntries(
          await Promise.all(
            Object.entries(samples).map(async ([build, byCommand]) => [
              build,
              {
                commit: await commitOf(checkouts[build]!),
                ...Object.fromEntries(
                  Object.entries(byCommand).map(([k, s]) => [
                    k,
                    {
                      helper_cpu_ms_p50: r(percentile(s.helper, 50)),
                      helper_cpu_ms_min: r(Math.min(...s.helper)),
                      total_cpu_ms_p50: r(percentile(s.total, 50)),
                      pds_requests_p50: percentile(s.pds, 50),
                      plc_requests_p50: percentile(s.plc, 50),
                      pds_requests_by_method_mean: Object.fromEntries(
                        Object.entries(s.nsids).map(([n, c]) => [n, r(c)]),
                      ),
                    },
                  ]),
                ),
              },
            ]),
          ),
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
