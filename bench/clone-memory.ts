// `npm run bench:clone-memory -- --source DIR [--rounds 2] [--variants 'A;B'] [--agent 0] [--json FILE]`: the peak
// resident memory of every process of a cold `git clone` from the dev network, beside git's own clone
// of the same repository over file:// in the same run. The source's branches and tags are pushed to
// two repositories, one public and one private (`repo create --private`); each round then clones each
// from an empty cache, directly and through a warm agent started for that clone alone, and clones the
// source over file://. Every process is measured by GNU time as it exits: git runs its subcommands
// (index-pack, upload-pack, pack-objects, the remote helpers) through a `git` of the bench's own
// (GIT_EXEC_PATH) that runs the real one under GNU time, and the agent's peak is its VmHWM read before
// it stops (and its git spawner's). `--variants` runs the helper and the agent with each of those
// in turn, '' being as they are: words starting with '-' are added to Node's command line, NAME=VALUE
// words to the environment. `--agent 0` leaves out the clones through the agent. Prints each clone
// as it ends, then a table of medians (each round's figure in brackets). See
// docs/reference/performance.md, "A clone's memory".
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startNetwork } from 'knotless-devnet';
import { shellQuote, writeWrappers } from '../packages/knotless-devnet/src/dev/env-file.ts';
import { BIN_SCRIPTS, NODE_FLAGS } from '../packages/knotless/src/paths.ts';
import { run } from './client.ts';
import { localEnv } from './local.ts';

const { values } = parseArgs({
  options: {
    source: { type: 'string' },
    rounds: { type: 'string', default: '2' },
    variants: { type: 'string', default: '' },
    agent: { type: 'string', default: '1' },
    json: { type: 'string' },
  },
});
if (values.source === undefined) {
  process.stderr.write('clone-memory bench: name the repository to clone with --source DIR.\n');
  process.exit(64);
}
const source = path.resolve(values.source);
const rounds = Number(values.rounds);
const variants = values.variants.split(';');

const home = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-bench-clone-memory-'));
const net = await startNetwork();

/** One measured process: what it was, its peak resident memory (MiB) and its CPU (ms). */
interface Proc {
  what: string;
  mib: number;
  cpuMs: number;
}

/**
 * A directory git takes as its exec path: every entry of the real one linked, but `git` itself (which
 * git runs for its subcommands) and `git-remote-knotless` run under GNU time, each writing its figures
 * to a file of its own in `log`.
 */
function execPathWrappers(dir: string, log: string): void {
  const real = gitExecPath;
  fs.mkdirSync(dir, { recursive: true });
  for (const name of fs.readdirSync(real))
    if (name !== 'git' && name !== 'git-remote-knotless')
      fs.symlinkSync(path.join(real, name), path.join(dir, name));
  const timed = (target: string) =>
    `#!/bin/sh\nexec /usr/bin/time -f '%M %U %S %C' -o ${shellQuote(log)}/$$ ${shellQuote(target)} "$@"\n`;
  fs.writeFileSync(path.join(dir, 'git'), timed(path.join(real, 'git')), { mode: 0o755 });
  const launcher = path.join(path.dirname(BIN_SCRIPTS['git-remote-knotless']!), 'git-remote-knotless');
  // The helper's own launcher (what npm links and git runs), on the Node the variant names (BENCH_NODE: a script adding its flags).
  fs.writeFileSync(
    path.join(dir, 'git-remote-knotless'),
    `#!/bin/sh\nKNOTLESS_NODE="$BENCH_NODE" exec /usr/bin/time -f '%M %U %S %C' -o ${shellQuote(log)}/$$ ${shellQuote(launcher)} "$@"\n`,
    { mode: 0o755 },
  );
}

/** The figures the wrappers wrote since `log` was emptied, one per process, named by its command. */
function readLog(log: string): Proc[] {
  const procs: Proc[] = [];
  for (const f of fs.readdirSync(log)) {
    const line = fs.readFileSync(path.join(log, f), 'utf8').trim().split('\n').at(-1)!;
    const [kib, user, sys, ...cmd] = line.split(' ');
    const argv = cmd.map((a) => path.basename(a));
    const what =
      argv[0] === 'git'
        ? `git ${argv.slice(1).find((a) => !a.startsWith('-')) ?? ''}`.trim()
        : argv[0] === 'git-remote-knotless'
          ? 'helper'
          : argv[0]!;
    procs.push({
      what,
      mib: Math.round(Number(kib) / 1024),
      cpuMs: Math.round((Number(user) + Number(sys)) * 1000),
    });
    fs.rmSync(path.join(log, f));
  }
  return procs.sort((a, b) => b.mib - a.mib);
}

const gitExecPath = (
  await run('git', ['--exec-path'], { cwd: home, env: process.env as Record<string, string> })
).stdout.trim();

/** Runs `cmd` under GNU time: the whole tree's peak (the kernel's maximum over it) and its CPU. */
async function timed(cmd: string, args: string[], cwd: string, env: Record<string, string>) {
  const out = path.join(home, 'time-top');
  const t = await run('/usr/bin/time', ['-f', '%M %U %S %e', '-o', out, cmd, ...args], { cwd, env });
  const [kib, user, sys, wall] = fs
    .readFileSync(out, 'utf8')
    .trim()
    .split('\n')
    .at(-1)!
    .split(' ')
    .map(Number);
  return {
    ...t,
    treeMib: Math.round(kib! / 1024),
    cpuMs: Math.round((user! + sys!) * 1000),
    wallMs: Math.round(wall! * 1000),
  };
}

/** VmHWM of a process, MiB. */
const hwm = (pid: number): number =>
  Math.round(Number(/VmHWM:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024);
const cpuOf = (pid: number): number => {
  // utime and stime, fields 14 and 15 of /proc/PID/stat, in clock ticks (100 a second on Linux).
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};

interface Row {
  round: number;
  repo: string;
  how: string;
  variant: string;
  treeMib: number;
  cpuMs: number;
  wallMs: number;
  procs: Proc[];
}
const rows: Row[] = [];
try {
  const password = 'bench-password';
  await net.ensureAccount('alice.test', password);
  const bin = path.join(home, 'bin');
  writeWrappers(bin);
  const log = path.join(home, 'log');
  fs.mkdirSync(log);
  const exec = path.join(home, 'exec');
  execPathWrappers(exec, log);
  const base: Record<string, string> = {
    ...localEnv(home, bin, net),
    BENCH_NODE: process.execPath,
    KNOTLESS_SERVICE: net.pdsUrl,
    KNOTLESS_AGENT: '0',
    KNOTLESS_COMPACT: '0',
  };
  await run('knotless', ['login', 'alice.test', '--app-password', password], { cwd: home, env: base });
  const copy = path.join(home, 'source.git');
  await run('git', ['clone', '-q', '--bare', '--no-local', source, copy], { cwd: home, env: base });
  const repos: Array<[string, string[]]> = [
    ['pub', []],
    ['priv', ['--private']],
  ];
  for (const [name, flags] of repos) {
    await run('knotless', ['repo', 'create', name, ...flags], { cwd: home, env: base });
    await run('git', ['push', '-q', '--mirror', `knotless://alice.test/${name}`], { cwd: copy, env: base });
  }
  const identity = path.join(base['KNOTLESS_CACHE_DIR']!, 'identity.json');
  let n = 0;
  /** An empty cache but for the identities it resolved (so that cold means packs and code, not DNS). */
  const coldCache = (): string => {
    const dir = path.join(home, `cold-${++n}`);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.copyFileSync(identity, path.join(dir, 'identity.json'));
    return dir;
  };
  const clone = async (
    round: number,
    repo: string,
    how: string,
    variant: string,
    url: string,
    env: Record<string, string>,
    agentPid?: number,
  ) => {
    const dest = path.join(home, `clone-${++n}`);
    readLog(log);
    const t = await timed('git', ['clone', '-q', url, dest], home, { ...env, GIT_EXEC_PATH: exec });
    const procs = readLog(log);
    if (agentPid !== undefined) {
      procs.push({ what: 'agent', mib: hwm(agentPid), cpuMs: cpuOf(agentPid) });
      // The agent's git spawner (a small Node process it forks to start git commands).
      for (const child of fs
        .readFileSync(`/proc/${agentPid}/task/${agentPid}/children`, 'utf8')
        .split(' ')
        .filter(Boolean))
        if (fs.readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('git-spawner'))
          procs.push({ what: 'git spawner', mib: hwm(Number(child)), cpuMs: cpuOf(Number(child)) });
    }
    procs.sort((a, b) => b.mib - a.mib);
    rows.push({ round, repo, how, variant, treeMib: t.treeMib, cpuMs: t.cpuMs, wallMs: t.wallMs, procs });
    fs.rmSync(dest, { recursive: true, force: true });
    const last = rows.at(-1)!;
    process.stderr.write(
      `${round} ${repo} ${how} [${variant}] tree ${last.treeMib} MiB, ${last.cpuMs} ms CPU, ${last.wallMs} ms: ${procs.map((p) => `${p.what} ${p.mib}`).join(', ')}\n`,
    );
  };
  for (let round = 1; round <= rounds; round++) {
    await clone(round, 'jq', 'git file://', '', `file://${copy}`, base);
    for (const variant of variants) {
      // A variant's words: NAME=VALUE sets the environment, anything else is a flag of Node's.
      const words = variant.split(' ').filter(Boolean);
      const flags = words.filter((w) => w.startsWith('-'));
      const node = path.join(home, `node-${variants.indexOf(variant)}`);
      fs.writeFileSync(
        node,
        `#!/bin/sh\nexec ${shellQuote(process.execPath)} ${flags.map(shellQuote).join(' ')} "$@"\n`,
        { mode: 0o755 },
      );
      const opts = {
        ...Object.fromEntries(
          words
            .filter((w) => !w.startsWith('-'))
            .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
        ),
        BENCH_NODE: node,
      };
      for (const repo of ['pub', 'priv']) {
        const url = `knotless://alice.test/${repo}`;
        await clone(round, repo, 'helper', variant, url, {
          ...base,
          ...opts,
          KNOTLESS_CACHE_DIR: coldCache(),
        });
        if (values.agent === '0') continue;
        const cache = coldCache();
        const socket = path.join(cache, 'a.sock');
        const env = { ...base, ...opts, KNOTLESS_CACHE_DIR: cache };
        // Started as a helper starts it (agent/autostart.ts): with Node's flags for knotless's processes.
        const agent = spawn(
          process.execPath,
          [...NODE_FLAGS, ...flags, BIN_SCRIPTS['knotless']!, 'agent', '--socket', socket],
          {
            env,
            stdio: ['ignore', 'pipe', 'ignore'],
          },
        );
        await new Promise<void>((resolve, reject) => {
          let out = '';
          agent.stdout.setEncoding('utf8').on('data', (d: string) => {
            out += d;
            if (/^ready$/m.test(out)) resolve();
          });
          agent.once('exit', (code) => reject(new Error(`the agent exited ${code}`)));
        });
        try {
          await clone(
            round,
            repo,
            'agent',
            variant,
            url,
            { ...env, KNOTLESS_AGENT: '', KNOTLESS_AGENT_SOCKET: socket },
            agent.pid,
          );
        } finally {
          agent.kill();
          await new Promise((r) => agent.once('exit', r));
        }
      }
    }
  }
  const median = (xs: number[]): number => {
    const v = [...xs].sort((a, b) => a - b);
    return v.length === 0
      ? NaN
      : v.length % 2 === 1
        ? v[(v.length - 1) / 2]!
        : (v[v.length / 2 - 1]! + v[v.length / 2]!) / 2;
  };
  const groups = new Map<string, Row[]>();
  for (const r of rows) {
    const key = `${r.repo} | ${r.how} | ${r.variant}`;
    groups.set(key, [...(groups.get(key) ?? []), r]);
  }
  /** A process's peak in each round (the largest of its name, when several ran), median and all. */
  const col = (rs: Row[], name: string): string => {
    const each = rs.map((r) => Math.max(0, ...r.procs.filter((p) => p.what === name).map((p) => p.mib)));
    return each.every((x) => x === 0) ? '' : `${median(each)} (${each.join(', ')})`;
  };
  console.log(
    '| repository | clone | variant | helper MiB | agent MiB | git spawner MiB | index-pack MiB | whole tree MiB | CPU ms (tree) | wall ms |',
  );
  console.log('| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const [key, rs] of groups)
    console.log(
      `| ${key} | ${col(rs, 'helper')} | ${col(rs, 'agent')} | ${col(rs, 'git spawner')} | ${col(rs, 'git index-pack')} | ${median(rs.map((r) => r.treeMib))} | ${median(rs.map((r) => r.cpuMs))} | ${median(rs.map((r) => r.wallMs))} |`,
    );
  const load = os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');
  console.log(
    `clone-memory bench, ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version}, load ${load}`,
  );
  if (values.json !== undefined) fs.writeFileSync(values.json, JSON.stringify(rows, null, 2) + '\n');
} finally {
  await net.close();
  fs.rmSync(home, { recursive: true, force: true });
}
