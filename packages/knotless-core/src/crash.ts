import { crashPointFromEnv } from './config/env.ts';

/**
 * Named points where a fault-injection test can kill this process, to prove that a kill at any
 * step loses nothing. KNOTLESS_CRASH_AT=<name> kills at the first pass through <name>;
 * <name>:<n> at the n-th. Only the test harness sets it; unset, a crash point costs one comparison.
 */
export const CRASH_POINTS = [
  'push:pack-built',
  'push:packs-folded',
  'push:blob-uploaded',
  'push:before-record-write',
  'push:after-record-write',
  'push:before-withdraw',
  'compact:blob-uploaded',
  'compact:before-record-write',
  'compact:after-record-write',
  'fetch:blob-downloaded',
  'fetch:pack-indexed',
  'commit:packs-folded',
  'commit:before-record-write',
  'lfs:blob-landed',
  'lfs:blob-listed',
  'delete:refs-deleted',
  'delete:table-deleted',
  'migrate:before-table-write',
  'migrate:table-written',
  'migrate:records-deleted',
] as const;

/** One named crash point. */
export type CrashPoint = (typeof CRASH_POINTS)[number];

const wanted = crashPointFromEnv();
const passes = new Map<string, number>();

/** Kills the process with SIGKILL (no cleanup, as a power cut would) when the harness asked for `name`. */
export function crashPoint(name: CrashPoint): void {
  if (wanted === undefined) return;
  const n = (passes.get(name) ?? 0) + 1;
  passes.set(name, n);
  if (wanted === name || wanted === `${name}:${n}`) process.kill(process.pid, 'SIGKILL');
}
