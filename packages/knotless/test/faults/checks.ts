// The invariants every fault case ends on: what the remote's refs name is stored and whole, no
// commit git was told `ok` for is gone, and a fresh clone passes `git fsck --full`.
import fs from 'node:fs';
import path from 'node:path';
import type { FaultEnv } from './env.ts';

/** One fault case: a name, what must be observed, and a run that reports what was. */
export interface FaultCase {
  group: 'pds' | 'crash' | 'hostile';
  name: string;
  expected: string;
  run(env: FaultEnv): Promise<string>;
}

/**
 * The same case on a repository on a ref table, the default layout: its name says so, every process
 * it starts runs with the table on, and it also fails when its repository left its table or had ref
 * records written beside it. `expected` replaces the case's where the table's requests differ.
 */
export function onTable(c: FaultCase, expected = c.expected): FaultCase {
  return { ...c, name: `${c.name} (ref table)`, expected, run: (env) => env.onTable(() => c.run(env)) };
}

/** The remote's refs (`git ls-remote`), name → object id. */
export async function remoteRefs(env: FaultEnv, url: string): Promise<Map<string, string>> {
  const out = await env.alice.ok(env.alice.dir(), 'ls-remote', url);
  const refs = new Map<string, string>();
  for (const line of out.split('\n').filter(Boolean)) {
    const [oid, name] = line.split('\t');
    if (name !== 'HEAD') refs.set(name!, oid!);
  }
  return refs;
}

/**
 * Mirrors the remote into a fresh bare repository and checks it: every ref the remote lists is
 * there, and `git fsck --full` is clean. Returns "fsck clean" or what went wrong; `dir` gets the clone.
 */
export async function freshCloneCheck(env: FaultEnv, url: string): Promise<{ verdict: string; dir: string }> {
  const dir = path.join(env.alice.dir(), 'mirror.git');
  const clone = await env.alice.git(path.dirname(dir), 'clone', '-q', '--mirror', url, dir);
  if (clone.code !== 0) return { verdict: `clone failed: ${lastLine(clone.stderr)}`, dir };
  for (const [name, oid] of await remoteRefs(env, url)) {
    const has = await env.alice.git(dir, 'cat-file', '-e', oid);
    if (has.code !== 0) return { verdict: `${name} names ${oid}, which is not stored`, dir };
  }
  const fsck = await env.alice.git(dir, 'fsck', '--full', '--strict');
  return { verdict: fsck.code === 0 ? 'fsck clean' : `fsck: ${lastLine(fsck.stderr)}`, dir };
}

/** True when `oid` is reachable from `ref` in the repository at `dir`. */
export async function reachable(env: FaultEnv, dir: string, oid: string, ref: string): Promise<boolean> {
  return (await env.alice.git(dir, 'merge-base', '--is-ancestor', oid, ref)).code === 0;
}

/** The last non-empty line of a command's output, for short observations. */
export function lastLine(text: string): string {
  return (
    text
      .trim()
      .split('\n')
      .filter((l) => l.trim() !== '')
      .pop() ?? ''
  ).trim();
}

/** Files and directories directly in `dir` (to see that nothing was written beside a clone). */
export function entries(dir: string): string[] {
  return fs.readdirSync(dir).sort();
}

/** Bytes that do not compress: a pack holding them is as large as they are. */
export function noise(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
