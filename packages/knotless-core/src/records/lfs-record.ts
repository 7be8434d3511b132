import { KnotlessError } from '../errors.ts';
import { LFS_COLLECTION, refKeyPrefix } from './collections.ts';
import { parseBlobRef, type BlobRef } from './ref-rules.ts';

/** Most blobs one LFS object may be split into (the lexicon's limit). */
export const MAX_LFS_BLOBS = 10_000;

/**
 * A `dev.knotless.lfs` record (lexicons/dev/knotless/lfs.json): one Git LFS object of a repository,
 * as blobs of `chunk` bytes of it each, in order. Written again as each blob lands, so a record with
 * fewer blobs than the object needs is an upload that stopped, to resume after its last blob.
 */
export interface LfsRecord {
  repo: string;
  /** Public repositories only: a private one's record does not name the object. */
  oid?: string;
  size: number;
  chunk: number;
  blobs: BlobRef[];
  /** Private repositories only: the key epoch each blob is encrypted under. */
  epoch?: number;
  createdAt: string;
}

/** True for a Git LFS object id: a SHA-256, 64 lowercase hex digits. */
export function isLfsOid(oid: unknown): oid is string {
  return typeof oid === 'string' && /^[0-9a-f]{64}$/.test(oid);
}

/** The record key of a public repository's object `oid` (a private one's is its sealer's keyed hash). */
export function lfsKey(repo: string, oid: string): string {
  return `${refKeyPrefix(repo)}${oid}`;
}

/** How many blobs an object of `size` bytes needs at `chunk` bytes each (an empty object has one). */
export function lfsBlobCount(size: number, chunk: number): number {
  return Math.max(1, Math.ceil(size / chunk));
}

/** True when every blob the object needs is listed. */
export function lfsComplete(record: LfsRecord): boolean {
  return record.blobs.length === lfsBlobCount(record.size, record.chunk);
}

function corrupt(what: string): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `The remote holds an invalid LFS record (${what}); download it again from a good copy, or push the object again.`,
  );
}

/** The record as written to the PDS. */
export function writeLfsRecord(record: LfsRecord): Record<string, unknown> {
  return { $type: LFS_COLLECTION, ...record };
}

/**
 * Validates a record read from a PDS against the lexicon: every field has its type, the blobs are
 * blob references, no more of them than the object needs, and none larger than `chunk` plus what
 * sealing adds (`overhead`).
 */
export function parseLfsRecord(value: unknown, overhead = 0): LfsRecord {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw corrupt('not an object');
  const v = value as Record<string, unknown>;
  const { repo, oid, size, chunk, blobs, epoch, createdAt } = v;
  if (typeof repo !== 'string') throw corrupt('no repository');
  if (oid !== undefined && !isLfsOid(oid)) throw corrupt('an oid that is not a SHA-256');
  if (!Number.isSafeInteger(size) || (size as number) < 0) throw corrupt('no size');
  if (!Number.isSafeInteger(chunk) || (chunk as number) < 1) throw corrupt('no chunk size');
  if (!Array.isArray(blobs)) throw corrupt('a blob list that is not a list');
  if (epoch !== undefined && (!Number.isSafeInteger(epoch) || (epoch as number) < 0))
    throw corrupt('a key epoch that is not a number');
  if (typeof createdAt !== 'string') throw corrupt('no createdAt time');
  const record: LfsRecord = {
    repo,
    size: size as number,
    chunk: chunk as number,
    blobs: blobs.map((b) => parseBlobRef(b, corrupt)),
    createdAt,
    ...(oid === undefined ? {} : { oid }),
    ...(epoch === undefined ? {} : { epoch: epoch as number }),
  };
  const needed = lfsBlobCount(record.size, record.chunk);
  if (needed > MAX_LFS_BLOBS) throw corrupt(`more than ${MAX_LFS_BLOBS} blobs`);
  if (record.blobs.length > needed) throw corrupt('more blobs than the object needs');
  if (record.blobs.some((b) => b.size > record.chunk + overhead || b.size < 0))
    throw corrupt('a blob larger than its part of the object');
  return record;
}

/** The largest file git-lfs writes as a pointer; anything longer is a file of its own. */
const MAX_POINTER_BYTES = 1024;

/**
 * The object a Git LFS pointer file names (git-lfs's spec v1: `version`, `oid sha256:<hex>`,
 * `size <n>`, each on its own line, keys sorted, nothing else but other `key value` lines), or
 * undefined when `content` is not one: the appview shows such a file as the object it stands for.
 */
export function parseLfsPointer(content: Uint8Array): { oid: string; size: number } | undefined {
  if (content.length > MAX_POINTER_BYTES) return undefined;
  const text = Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('utf8');
  const lines = text.split('\n');
  if (lines.pop() !== '' || lines[0] !== 'version https://git-lfs.github.com/spec/v1') return undefined;
  let oid: string | undefined;
  let size: number | undefined;
  for (const line of lines.slice(1)) {
    const m = /^([a-z0-9.-]+) (.+)$/.exec(line);
    if (m === null) return undefined;
    if (m[1] === 'oid') oid = /^sha256:([0-9a-f]{64})$/.exec(m[2]!)?.[1];
    else if (m[1] === 'size') size = /^\d{1,15}$/.test(m[2]!) ? Number(m[2]) : undefined;
  }
  return oid === undefined || size === undefined ? undefined : { oid, size };
}
