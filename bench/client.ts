import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN_SCRIPTS } from '../packages/knotless/src/paths.ts';
import { writeWrappers } from '../packages/knotless-devnet/src/dev/env-file.ts';
import { localEnv } from './local.ts';
import type { Rig } from './setup.ts';

/** A finished command and how long it took. */
export interface Timed {
  ms: number;
  stdout: string;
  stderr: string;
  /** Peak resident memory of the largest process in its tree, MiB (GNU time's %M), when measured. */
  peakMib?: number;
  /** CPU time (user + system) of its whole tree, ms (GNU time's %U + %S), when measured. */
  cpuMs?: number;
}

/** Runs a command to completion; fails loudly when it fails, since a bench of failures measures nothing. */
export function run(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: Record<string, string> },
): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = performance.now() - started;
      if (code === 0) resolve({ ms, stdout, stderr });
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code}:\n${stderr}`));
    });
  });
}

/**
 * Runs a command under GNU time: the peak resident memory of the largest process in its tree (the
 * kernel carries a reaped child's peak up to its parent, so git's figure covers the helper,
 * pack-objects and index-pack), and the CPU time of the whole tree (reaped children included, at
 * GNU time's 10 ms resolution). Detached processes and the agent are not in the tree.
 */
export async function runMeasured(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: Record<string, string>; home: string },
): Promise<Timed> {
  const out = path.join(opts.home, `time-${process.hrtime.bigint()}`);
  const t = await run('/usr/bin/time', ['-f', '%M %U %S', '-o', out, cmd, ...args], opts);
  const [kib, user, sys] = fs.readFileSync(out, 'utf8').trim().split('\n').at(-1)!.split(' ').map(Number);
  fs.rmSync(out);
  return { ...t, peakMib: Math.round(kib! / 1024), cpuMs: Math.round((user! + sys!) * 1000) };
}

/** A user of the rig: git and knotless on PATH, logged in as alice, requests through one RTT's link. */
export interface Client {
  env(rtt: number, extra?: Record<string, string>): Record<string, string>;
  git(rtt: number, cwd: string, args: string[], extra?: Record<string, string>): Promise<Timed>;
  knotless(rtt: number, args: string[], extra?: Record<string, string>): Promise<Timed>;
  /**
   * A fresh cache directory that knows identities already (so "cold" means packs, not DNS); with
   * `compiled`, Node's compile cache too (the code a machine that ran knotless before has compiled).
   */
  coldCache(opts?: { compiled?: boolean }): string;
  home: string;
}

/** Sets up the client's home (wrappers, git identity) and logs alice in. */
export async function makeClient(rig: Rig, plain: boolean): Promise<Client> {
  const home = path.join(rig.dir, 'home');
  const bin = path.join(home, 'bin');
  writeWrappers(bin);
  const cacheDir = path.join(home, 'cache');
  let caches = 0;
  const scheme = plain ? 'http' : 'https';
  const client: Client = {
    home,
    env(rtt, extra = {}) {
      const link = rig.links.get(rtt)!;
      return {
        // The local network's environment (its cache is `cacheDir`), reached through the delay link.
        ...localEnv(home, bin, rig.net),
        GIT_SSL_CAINFO: rig.cert.certFile,
        KNOTLESS_SERVICE: `${scheme}://127.0.0.1:${link.pds.port}`,
        KNOTLESS_CA_CERTS: rig.cert.certFile,
        // Measure the general case: compaction on (the default; its whole cost is counted), no agent unless asked.
        KNOTLESS_AGENT: '0',
        ...extra,
      };
    },
    git: (rtt, cwd, args, extra) => runMeasured('git', args, { cwd, env: client.env(rtt, extra), home }),
    knotless: (rtt, args, extra) =>
      runMeasured(process.execPath, [BIN_SCRIPTS['knotless']!, ...args], {
        cwd: home,
        env: client.env(rtt, extra),
        home,
      }),
    coldCache(opts = {}) {
      const dir = path.join(home, `cold-cache-${++caches}`);
      fs.mkdirSync(dir, { recursive: true });
      fs.copyFileSync(path.join(cacheDir, 'identity.json'), path.join(dir, 'identity.json'));
      const v8 = path.join(cacheDir, 'v8');
      if (opts.compiled === true && fs.existsSync(v8))
        fs.cpSync(v8, path.join(dir, 'v8'), { recursive: true });
      return dir;
    },
  };
  const first = [...rig.links.keys()][0]!;
  await client.knotless(first, ['login', 'alice.test', '--app-password', rig.password]);
  await client.knotless(first, ['whoami']);
  return client;
}
