import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isMissing, readIfPresent, writeFileAtomic } from '../fsutil.ts';
import { parsePackInfo } from '../git/pack.ts';

/**
 * The objects of packs already indexed or made, by the SHA-256 of the pack's bytes (hashed here,
 * never taken from a record: the list is exactly those bytes' objects; SHA-256, not the pack's own
 * SHA-1 trailer, so that no crafted pack can pass for one it knows). A push folds the pack made by
 * the last push into the next one; knowing that pack's objects spares the fold an `index-pack` of it
 * (and a scratch repository), and each git process costs a process start. Kept in this process,
 * bounded (the oldest entries go first), and in a folder of the user's cache, so that the next push
 * from a new helper process knows them too.
 */
const MAX_PACKS = 256;
const MAX_OIDS = 200_000;
const known = new Map<string, readonly string[]>();
let oids = 0;

/** Keys already computed, by the bytes' object: a push asks for a pack's key at several steps. */
const keys = new WeakMap<Uint8Array, string>();

/** The key of a pack's bytes (hashed once per buffer: packs are never changed in place). */
export function packKey(bytes: Uint8Array): string {
  let key = keys.get(bytes);
  if (key === undefined) {
    key = crypto.createHash('sha256').update(bytes).digest('hex');
    keys.set(bytes, key);
  }
  return key;
}

/**
 * Whether this process writes the lists it learns to the cache folder too. The warm agent does not:
 * it keeps them in memory for the pushes it serves, and each file write costs it (the event loop
 * waits on it) on every push; it still reads the lists helper processes wrote.
 */
let writes = true;

/** Keeps the lists this process learns in its memory only (the warm agent). */
export function keepObjectsInMemoryOnly(): void {
  writes = false;
}

/** Where the memo is kept in the cache folder `cacheDir`. */
export function packMemoDir(cacheDir: string): string {
  return path.join(cacheDir, 'pack-objects');
}

/**
 * The pack's own objects, when this process has seen its bytes, or a process keeping the memo in
 * `dir` (packMemoDir) did.
 */
export function knownObjects(bytes: Uint8Array, dir?: string): readonly string[] | undefined {
  const key = packKey(bytes);
  const mine = known.get(key);
  if (mine !== undefined || dir === undefined) return mine;
  const kept = readKept(path.join(dir, key), bytes);
  if (kept !== undefined) remember(key, kept);
  return kept;
}

/**
 * Remembers a pack's own objects (in pack order, without bases a thin pack borrowed), in this
 * process and, given `dir`, on disk (unless {@link keepObjectsInMemoryOnly}).
 */
export function rememberObjects(bytes: Uint8Array, list: readonly string[], dir?: string): void {
  const key = packKey(bytes);
  if (!remember(key, list) || dir === undefined || !writes) return;
  writeFileAtomic(path.join(dir, key), list.join('\n'));
  trim(dir);
}

/** Remembers in this process; false when it knew the pack already or the list is too long to keep. */
function remember(key: string, list: readonly string[]): boolean {
  if (known.has(key) || list.length > MAX_OIDS) return false;
  known.set(key, list);
  oids += list.length;
  for (const [k, v] of known) {
    if (known.size <= MAX_PACKS && oids <= MAX_OIDS) break;
    known.delete(k);
    oids -= v.length;
  }
  return true;
}

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * A kept list, if it is one for these bytes: object names, as many as the pack holds, none twice.
 * Anything else (a file cut short by a full disk, damaged, or from another version) counts as
 * absent: the fold indexes the pack, and the list written then replaces it.
 */
function readKept(file: string, bytes: Uint8Array): string[] | undefined {
  const text = readIfPresent(file, 'latin1');
  if (text === undefined) return undefined;
  const list = text.split('\n');
  if (list.length !== parsePackInfo(bytes).count || !list.every((o) => OID.test(o))) return undefined;
  return new Set(list).size === list.length ? list : undefined;
}

/** The disk's bound: past DISK_MAX files, the least recently written go down to DISK_KEEP. */
const DISK_MAX = 512;
const DISK_KEEP = 384;

function trim(dir: string): void {
  const names = fs.readdirSync(dir);
  if (names.length <= DISK_MAX) return;
  const files: Array<{ file: string; at: number }> = [];
  for (const name of names) {
    const file = path.join(dir, name);
    try {
      files.push({ file, at: fs.statSync(file).mtimeMs });
    } catch (err) {
      // Another process trimmed it first.
      if (!isMissing(err)) throw err;
    }
  }
  files.sort((a, b) => a.at - b.at);
  for (const { file } of files.slice(0, files.length - DISK_KEEP)) fs.rmSync(file, { force: true });
}
