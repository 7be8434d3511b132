import fs from 'node:fs';
import path from 'node:path';
import { isMissing } from '../fsutil.ts';

/**
 * A background compaction's marker: a file in the user's cache, one per repository, holding the
 * compaction's process id. The helper creates it before it answers git and the compaction removes
 * it when it ends, so at most one runs per repository and whoever waits for background work (the
 * cost tests, a script) can tell when it is over without guessing.
 */
export function compactionMarker(cacheDir: string, did: string, repo: string): string {
  return path.join(cacheDir, 'compacting', `${did.replaceAll(':', '_')}+${encodeURIComponent(repo)}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: the process exists, it is someone else's.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Creates the marker for a compaction about to start and returns its open descriptor (write the
 * process id into it), or undefined when a live compaction of the repository holds it. A marker
 * whose process is gone (killed) is taken over.
 */
export function claimMarker(file: string): number | undefined {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      return fs.openSync(file, 'wx', 0o644);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = Number(readMarker(file));
    if (Number.isSafeInteger(pid) && pid > 0 && alive(pid)) return undefined;
    fs.rmSync(file, { force: true });
  }
  return undefined;
}

function readMarker(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

/** Removes the marker when it is this process's (or not yet filled in by the helper that started it). */
export function releaseMarker(file: string): void {
  const owner = readMarker(file);
  if (owner === String(process.pid) || owner === '') fs.rmSync(file, { force: true });
}
