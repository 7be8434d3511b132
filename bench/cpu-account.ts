// CPU accounting for the swarm (`npm run bench -- --cpu`): wall times on a shared 2-core machine say
// little, CPU time per process says where a push's cost goes. Every git command the swarm or a helper
// starts runs under `perf stat -e task-clock` (its CPU time to the microsecond, its children
// included), through a wrapper put first on PATH (the helper's wrapper puts it first again: git puts
// its exec path first for the helpers it runs); each output file is named by the role of the process
// that started it. A helper reports its own CPU when it exits (process.cpuUsage: all its threads, no
// children; a preloaded script), as perf would count the wrappers of its git commands too. The
// agent's CPU is read from /proc, this process's (the PDS, PLC, proxies and links all run in it) from
// process.cpuUsage, and the swarm driver's (the process that starts the swarm's git commands) is
// reported by it. `git push` itself is what perf counts for it less its helper's tree (the helper,
// its git commands and, measured here once, what a wrapper costs per command).
// Node's floor (`node -e 0`, counted as a helper is: bench/floor.ts) is measured just before and
// after each swarm and printed beside the helper's column.
// Not counted apart: a detached `knotless repo compact` (it reports as a helper), rare in a swarm of
// one-line pushes (a push folds small packs itself).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { floorMs, nodeFloorRuns } from './floor.ts';

/** Runs of `node -e 0` before and after each swarm. */
const FLOOR_RUNS = 5;

/** CPU seconds per push, by where they were spent. */
export interface CpuBreakdown {
  pushes: number;
  /** Per push, CPU ms: `git push` itself (its helper excluded). */
  git_push: number;
  /** The helper process itself (git commands it ran excluded): node start-up, our code. */
  helper: number;
  /**
   * `node -e 0` counted the same way as the helper (bench/floor.ts): the median of runs just before
   * and just after the swarm, for reading the helper's figure on a machine of unknown speed.
   */
  node_floor: number;
  /** git commands the helper ran (pack-objects, rev-list, …), by subcommand. */
  helper_git: Record<string, number>;
  /** How many git processes the helper started per push. */
  helper_git_processes: number;
  /** The warm agent, when the swarm went through one. */
  agent: number;
  /** This process (the reference PDS, PLC, the devnet proxy and delay links) and the swarm's driver. */
  pds_and_bench: number;
  /** The swarm's own `git add` and `git commit` before each push (load, not the push's cost). */
  git_add_commit: number;
  /** What the whole machine spent (/proc/stat), other users' work included, and its capacity. */
  machine_busy: number;
  machine_capacity: number;
}

function ticks(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/**
 * The agent's ticks and its git spawner's (a child that starts the agent's git commands, whose own
 * CPU is the agent's cost; the git commands it starts are counted through their wrappers).
 */
function agentTicks(pid: number): number {
  let total = ticks(pid);
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== pid) continue;
      if (!fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('git-spawner')) continue;
      total += ticks(Number(entry));
    } catch (err) {
      // A process that ended while being read.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && (err as NodeJS.ErrnoException).code !== 'ESRCH')
        throw err;
    }
  }
  return total;
}

/** Busy and total CPU time of the machine, in clock ticks (/proc/stat's first line). */
function machine(): { busy: number; total: number } {
  const cpu = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0);
  const total = cpu.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** Wrappers in `dir` that account every git, helper and knotless process into `dir/cpu/`. */
export class CpuAccount {
  readonly dir: string;
  readonly #bin: string;
  #cpu0 = process.cpuUsage();
  #agent0 = 0;
  #machine0 = machine();
  #floor: number[] = [];

  constructor(dir: string) {
    this.#bin = path.join(dir, 'acct-bin');
    this.dir = path.join(dir, 'cpu');
    fs.mkdirSync(this.#bin, { recursive: true });
    const git = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
    // One file per process: <what>.<role of its starter>.<subcommand>.<pid>.
    const perf = (what: string, sub: string, role = '${KNOTLESS_ACCT_ROLE:-top}'): string =>
      `exec perf stat -x, -e task-clock -o "$KNOTLESS_ACCT_DIR/${what}.${role}.${sub}.$$"`;
    const write = (name: string, body: string): void =>
      fs.writeFileSync(path.join(this.#bin, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    write('git', `${perf('git', '$1')} ${git} "$@"`);
    const preload = path.join(this.#bin, 'self-cpu.cjs');
    fs.writeFileSync(
      preload,
      `const fs = require('node:fs');\nprocess.on('exit', () => {\n  const u = process.cpuUsage();\n` +
        `  fs.writeFileSync(\`\${process.env.KNOTLESS_ACCT_DIR}/\${process.env.KNOTLESS_ACCT_SELF}.\${process.pid}\`, ` +
        `\`\${(u.user + u.system) / 1000},msec,task-clock,\\n\`);\n});\n`,
    );
    write(
      'git-remote-knotless',
      `export KNOTLESS_ACCT_SELF=helper.\${KNOTLESS_ACCT_ROLE:-top}.- KNOTLESS_ACCT_ROLE=helper PATH=${this.#bin}:$PATH ` +
        `NODE_OPTIONS="--require=${preload}"; exec ${process.execPath} ${BIN_SCRIPTS['git-remote-knotless']!} "$@"`,
    );
    this.#overhead = calibrate(this.#bin);
  }

  /** CPU seconds one wrapped git command costs its parent beyond the command's own (sh and perf). */
  readonly #overhead: number;

  /** The environment that routes the swarm's processes through the wrappers. */
  env(base: Record<string, string>): Record<string, string> {
    return { ...base, PATH: `${this.#bin}:${base['PATH'] ?? ''}`, KNOTLESS_ACCT_DIR: this.dir };
  }

  /** Starts counting now (what was counted before is dropped). */
  start(agentPid: number | undefined): void {
    // Before the counters start: these processes are not the swarm's.
    this.#floor = nodeFloorRuns(FLOOR_RUNS);
    fs.rmSync(this.dir, { recursive: true, force: true });
    fs.mkdirSync(this.dir);
    this.#cpu0 = process.cpuUsage();
    this.#agent0 = agentPid === undefined ? 0 : agentTicks(agentPid);
    this.#machine0 = machine();
  }

  /**
   * What was spent since {@link start}, per push landed. With an agent (`agentPid`), the helper's git
   * commands are the agent's children (it runs the helper's code for the thin helper git started),
   * so they are not in `git push`'s count. `driverMs`: the CPU of the process that ran the swarm's
   * git commands (swarm-driver.ts), counted with this one's as the bench's own.
   */
  finish(agentPid: number | undefined, pushes: number, driverMs = 0): CpuBreakdown {
    const hz = 100;
    const own = process.cpuUsage(this.#cpu0);
    const cpu = { user: own.user + driverMs * 1000, system: own.system };
    const agent = agentPid === undefined ? 0 : (agentTicks(agentPid) - this.#agent0) / hz;
    const m = machine();
    this.#floor.push(...nodeFloorRuns(FLOOR_RUNS));
    const sums = new Map<string, number>();
    for (const file of fs.readdirSync(this.dir)) {
      const [what, role, sub] = file.split('.');
      const line = fs
        .readFileSync(path.join(this.dir, file), 'utf8')
        .split('\n')
        .find((l) => l.includes(',task-clock,'));
      if (line === undefined) continue;
      const k = `${what}:${role}:${sub}`;
      sums.set(k, (sums.get(k) ?? 0) + Number(line.split(',')[0]) / 1000);
    }
    let helperGitTotal = 0;
    const helperGit: Record<string, number> = {};
    for (const [k, s] of sums) {
      const [what, role, sub] = k.split(':');
      if (what === 'git' && role === 'helper') {
        helperGit[sub!] = s;
        helperGitTotal += s;
      }
    }
    const get = (k: string): number => sums.get(k) ?? 0;
    const helperAll = [...sums].filter(([k]) => k.startsWith('helper:')).reduce((a, [, s]) => a + s, 0);
    const wrapped = fs.readdirSync(this.dir).filter((f) => f.startsWith('git.helper.')).length;
    const helperTree = helperAll + (agentPid === undefined ? helperGitTotal + wrapped * this.#overhead : 0);
    const per = (s: number): number => Math.round((s / Math.max(1, pushes)) * 1000);
    return {
      pushes,
      git_push: per(get('git:top:push') - helperTree),
      helper: per(helperAll),
      node_floor: floorMs(this.#floor),
      helper_git: Object.fromEntries(Object.entries(helperGit).map(([k, s]) => [k, per(s)])),
      helper_git_processes: Math.round((wrapped / Math.max(1, pushes)) * 10) / 10,
      agent: per(agent),
      pds_and_bench: per((cpu.user + cpu.system) / 1e6),
      git_add_commit: per(get('git:top:add') + get('git:top:commit')),
      machine_busy: per((m.busy - this.#machine0.busy) / hz),
      machine_capacity: per((m.total - this.#machine0.total) / hz),
    };
  }
}

/** What a wrapper costs beyond the command it runs: the median of five runs of `git --version`. */
function calibrate(bin: string): number {
  const dir = fs.mkdtempSync(path.join(bin, 'calibrate-'));
  const runs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const outer = path.join(dir, 'outer');
    execFileSync(
      'perf',
      ['stat', '-x,', '-e', 'task-clock', '-o', outer, path.join(bin, 'git'), '--version'],
      {
        env: { ...process.env, KNOTLESS_ACCT_DIR: dir, KNOTLESS_ACCT_ROLE: 'calibrate' },
        stdio: 'ignore',
      },
    );
    const ms = (file: string): number =>
      Number(
        fs
          .readFileSync(file, 'utf8')
          .split('\n')
          .find((l) => l.includes(',task-clock,'))!
          .split(',')[0],
      );
    const inner = fs.readdirSync(dir).find((f) => f.startsWith('git.calibrate.'))!;
    runs.push(ms(outer) - ms(path.join(dir, inner)));
    fs.rmSync(path.join(dir, inner));
  }
  fs.rmSync(dir, { recursive: true, force: true });
  return runs.sort((a, b) => a - b)[2]! / 1000;
}

/** One line per swarm: CPU ms per push, by where it went. */
export function cpuTable(rows: Array<{ agents: number; via: string; cpu: CpuBreakdown }>): string {
  const lines = rows.map(({ agents, via, cpu }) => {
    const plumbing = Object.entries(cpu.helper_git)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    const ours =
      cpu.git_push +
      cpu.helper +
      Object.values(cpu.helper_git).reduce((a, b) => a + b, 0) +
      cpu.agent +
      cpu.pds_and_bench;
    return `| ${agents} | ${via} | ${cpu.pushes} | ${cpu.git_push} | ${cpu.helper} | ${cpu.node_floor} | ${cpu.helper_git_processes}: ${plumbing} | ${cpu.agent} | ${cpu.pds_and_bench} | ${ours} | ${cpu.git_add_commit} | ${cpu.machine_busy} / ${cpu.machine_capacity} |`;
  });
  return [
    "| agents | via | pushes | git push | helper | Node's floor | git under the helper (processes: ms) | agent | PDS + bench process | push total | git add + commit | machine busy / capacity |",
    '| ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |',
    ...lines,
  ].join('\n');
}
