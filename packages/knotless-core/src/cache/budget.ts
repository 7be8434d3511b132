import fs from 'node:fs';
import module from 'node:module';
import path from 'node:path';
import { isMissing } from '../fsutil.ts';
import { lockMirror } from './mirror-lock.ts';
import { cacheUsage, type CacheEntry, type CacheUsage } from './usage.ts';

/**
 * Bytes this process added to the cache. Eviction runs only in a process that grew the cache (a
 * git command that only lists never scans the directory).
 */
let grown = 0;

/** Notes that this process stored `bytes` more in the cache (a blob, a pack indexed into a mirror). */
export function noteCacheGrowth(bytes: number): void {
  grown += bytes;
}

/**
 * Removes one entry so that no reader ever sees half of it. A blob or view file is unlinked: a
 * reader that opened it reads it whole, one that comes after finds nothing and downloads again
 * (BlobCache.get). A mirror is taken only when no process holds it (Mirror.hold's lock): renamed
 * aside in one step, then deleted, so a process that starts using it meanwhile builds a new one.
 * Returns the bytes freed; 0 when it was in use or already gone.
 */
async function evict(entry: CacheEntry): Promise<number> {
  // A temporary file another process may still be writing (see TEMP_FILE_GRACE_MS): never taken.
  if (entry.usedAt === Infinity) return 0;
  if (entry.kind !== 'mirrors' || path.basename(entry.path).startsWith('.trash-')) {
    try {
      fs.rmSync(entry.path, { recursive: true });
      return entry.bytes;
    } catch (err) {
      if (isMissing(err)) return 0;
      throw err;
    }
  }
  const release = await lockMirror(entry.path, false);
  if (release === undefined) return 0;
  const trash = path.join(
    path.dirname(path.dirname(entry.path)),
    `.trash-${process.pid}-${Math.random().toString(36).slice(2)}`,
  );
  try {
    fs.renameSync(entry.path, trash);
  } catch (err) {
    if (isMissing(err)) return 0;
    throw err;
  } finally {
    await release();
  }
  fs.rmSync(trash, { recursive: true, force: true });
  return entry.bytes;
}

/**
 * Evicts least recently used entries until the cache is within `maxBytes`. Only what can be fetched
 * or rebuilt again is ever taken (blobs, mirrors, views); sessions live in the config directory, and
 * the identity and server files are a few kilobytes, kept. Several processes may trim at once: each
 * removal is whole or nothing, and a file another process removed first is skipped.
 */
export async function trimCache(cacheDir: string, maxBytes: number): Promise<number> {
  let freed = 0;
  // A blob that is also a mirror's pack (one file, two names) frees its bytes only with its second
  // name: measure again after a pass, and go on while passes still free something.
  for (let pass = 0; pass < 4; pass++) {
    const usage = cacheUsage(cacheDir);
    let over = usage.total - maxBytes;
    if (over <= 0) break;
    let removed = 0;
    for (const entry of usage.entries) {
      if (over <= 0) break;
      const n = await evict(entry);
      over -= n;
      removed += n;
    }
    if (removed === 0) break;
    freed += removed;
  }
  return freed;
}

/** Trims the cache when this process grew it; called once an operation has answered. */
export async function settleCache(config: { cacheDir: string; cacheMaxBytes: number }): Promise<void> {
  if (grown === 0) return;
  grown = 0;
  // Node writes its compile cache (v8/, see the bin stubs) at exit, after this trim: write it now so
  // that the cap counts it (flushCompileCache exists from Node 22.10; older ones skip this).
  (module as { flushCompileCache?: () => void }).flushCompileCache?.();
  await trimCache(config.cacheDir, config.cacheMaxBytes);
}

/** Removes every blob, mirror and view (a mirror in use by another process is left). */
export async function clearCache(cacheDir: string): Promise<{ freed: number; kept: CacheUsage }> {
  let freed = 0;
  for (const entry of cacheUsage(cacheDir).entries) freed += await evict(entry);
  return { freed, kept: cacheUsage(cacheDir) };
}
