import fs from 'node:fs';
import path from 'node:path';
import { isMissing } from '../fsutil.ts';

/** What the cache directory holds, by kind; only blobs, mirrors and views are ever evicted. */
export const CACHE_KINDS = ['blobs', 'mirrors', 'views', 'other'] as const;
export type CacheKind = (typeof CACHE_KINDS)[number];

/** One thing eviction may remove whole: a blob, a mirror (a bare repository) or a view. */
export interface CacheEntry {
  kind: Exclude<CacheKind, 'other'>;
  path: string;
  bytes: number;
  /** Milliseconds since the epoch of its last use (a file's mtime, which a read touches). */
  usedAt: number;
}

/** The cache's size by kind, and the entries eviction may take, least recently used first. */
export interface CacheUsage {
  kinds: Record<CacheKind, { bytes: number; entries: number }>;
  total: number;
  entries: CacheEntry[];
}

/**
 * A temporary file younger than this may be one another process is writing (it renames it into
 * place when done): never taken. An older one was left by a process that died mid-write.
 */
export const TEMP_FILE_GRACE_MS = 3600_000;

/** Where a mirror's last use is stamped (Mirror.hold touches it). */
export const MIRROR_STAMP = path.join('knotless', 'used');

/** lstat, or undefined when the file went away meanwhile (another process evicting or renaming). */
function statOf(file: string): fs.Stats | undefined {
  try {
    return fs.lstatSync(file);
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

function list(dir: string): fs.Dirent[] {
  try {
    return fs.readdirSync(dir, { withFileTypes: true });
  } catch (err) {
    if (isMissing(err)) return [];
    throw err;
  }
}

/**
 * A file's bytes, counted once however many names it has: a pack shared by the blob cache and a
 * mirror (BlobCache.share) is one file with two names.
 */
function fileBytes(st: fs.Stats, seen: Set<string>): number {
  if (st.nlink <= 1) return st.size;
  const key = `${st.dev}:${st.ino}`;
  if (seen.has(key)) return 0;
  seen.add(key);
  return st.size;
}

/** Bytes under a path (files' sizes; a vanished part counts nothing). */
export function treeBytes(p: string, seen: Set<string> = new Set()): number {
  const st = statOf(p);
  if (st === undefined) return 0;
  if (!st.isDirectory()) return st.isFile() ? fileBytes(st, seen) : 0;
  return list(p).reduce((n, e) => n + treeBytes(path.join(p, e.name), seen), 0);
}

const isTemp = (name: string) => name.endsWith('.tmp');

/** Files directly in `dir` (blobs), or one level down (views/<did>/<repo>.json), as entries. */
function fileEntries(
  dir: string,
  kind: 'blobs' | 'views',
  depth: number,
  now: number,
  seen: Set<string>,
  allTemp = false,
): CacheEntry[] {
  const out: CacheEntry[] = [];
  for (const e of list(dir)) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && depth > 0) {
      out.push(...fileEntries(p, kind, depth - 1, now, seen, allTemp));
      continue;
    }
    const st = statOf(p);
    if (st === undefined || !st.isFile()) continue;
    // Counted either way; taken only once its writer is surely gone.
    const temp = allTemp || isTemp(e.name);
    const usedAt = temp && now - st.mtimeMs < TEMP_FILE_GRACE_MS ? Infinity : st.mtimeMs;
    out.push({ kind, path: p, bytes: fileBytes(st, seen), usedAt });
  }
  return out;
}

/** Mirrors (mirrors/<did>/<repo>.git), and what an interrupted eviction left in mirrors/.trash-*. */
function mirrorEntries(dir: string, seen: Set<string>): CacheEntry[] {
  const out: CacheEntry[] = [];
  for (const owner of list(dir)) {
    const p = path.join(dir, owner.name);
    if (owner.name.startsWith('.trash-')) {
      out.push({ kind: 'mirrors', path: p, bytes: treeBytes(p, seen), usedAt: 0 });
      continue;
    }
    if (!owner.isDirectory()) continue;
    for (const repo of list(p)) {
      if (!repo.isDirectory() || !repo.name.endsWith('.git')) continue;
      const gitDir = path.join(p, repo.name);
      const stamp = statOf(path.join(gitDir, MIRROR_STAMP)) ?? statOf(gitDir);
      if (stamp === undefined) continue;
      out.push({ kind: 'mirrors', path: gitDir, bytes: treeBytes(gitDir, seen), usedAt: stamp.mtimeMs });
    }
  }
  return out;
}

/** Measures the cache directory. Safe while other processes write and evict in it. */
export function cacheUsage(cacheDir: string, now = Date.now()): CacheUsage {
  const seen = new Set<string>();
  const entries = [
    ...fileEntries(path.join(cacheDir, 'blobs'), 'blobs', 0, now, seen),
    ...mirrorEntries(path.join(cacheDir, 'mirrors'), seen),
    ...fileEntries(path.join(cacheDir, 'views'), 'views', 1, now, seen),
    // Packs being downloaded, built or uploaded (tmp/): a process that died mid-way leaves its file,
    // taken once surely abandoned; counted with the blobs they would have become.
    ...fileEntries(path.join(cacheDir, 'tmp'), 'blobs', 0, now, seen, true),
  ].sort((a, b) => a.usedAt - b.usedAt);
  const kinds = Object.fromEntries(CACHE_KINDS.map((k) => [k, { bytes: 0, entries: 0 }])) as Record<
    CacheKind,
    { bytes: number; entries: number }
  >;
  for (const e of entries) {
    kinds[e.kind].bytes += e.bytes;
    kinds[e.kind].entries++;
  }
  for (const e of list(cacheDir)) {
    if (['blobs', 'mirrors', 'views', 'tmp'].includes(e.name)) continue;
    kinds.other.bytes += treeBytes(path.join(cacheDir, e.name));
    kinds.other.entries++;
  }
  const total = CACHE_KINDS.reduce((n, k) => n + kinds[k].bytes, 0);
  return { kinds, total, entries: entries.filter((e) => e.usedAt !== Infinity) };
}
