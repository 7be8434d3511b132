import fs from 'node:fs';
import path from 'node:path';

/** A lock whose holder died is taken over after this long (a live holder refreshes it meanwhile). */
const STALE_MS = 15_000;

/**
 * Locks a mirror (its bare repository's path) across processes: its users hold it while they work
 * in it (`wait`: until the holder is done), and eviction tries it once (`wait` false: undefined when
 * held) so that a mirror is never deleted under a git command. proper-lockfile makes a directory
 * beside it (`<repo>.git.lock`) and keeps it fresh while held, so waiting lasts as long as the
 * holder's work: a lock left by a dead process is stale after 15 s. Loaded only here: most commands
 * never touch a mirror.
 */
export async function lockMirror(gitDir: string, wait: boolean): Promise<(() => Promise<void>) | undefined> {
  fs.mkdirSync(path.dirname(gitDir), { recursive: true, mode: 0o700 });
  const { default: lockfile } = await import('proper-lockfile');
  try {
    return await lockfile.lock(gitDir, {
      realpath: false,
      stale: STALE_MS,
      retries: wait ? { forever: true, minTimeout: 20, maxTimeout: 500 } : 0,
    });
  } catch (err) {
    if (wait || (err as NodeJS.ErrnoException).code !== 'ELOCKED') throw err;
    return undefined;
  }
}
