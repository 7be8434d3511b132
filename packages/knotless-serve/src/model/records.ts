// A record as the index keeps it: the fields of a repository record, a ref record or nothing, and
// the repository a record key belongs to. Pure rules, shared by ingest/ (events and backfill), db/
// (tables applied) and web/ (plain git's check of a private repository).
import { REPO_COLLECTION, isKnotlessError, parseRefRecord, type RefRecord } from 'knotless-core';
import { parseAtUri } from 'knotless-core/forge/records';

/**
 * A ref record, or undefined when the parser refuses it as invalid (it is then skipped, as the helper
 * skips it). Only that refusal means "skip": any other failure is a fault of ours and surfaces.
 */
export function refRecordOf(json: unknown): RefRecord | undefined {
  try {
    return parseRefRecord(json);
  } catch (err) {
    if (isKnotlessError(err, 'corrupt-remote')) return undefined;
    throw err;
  }
}

/** The fields of a repository record the index keeps. */
export function repoRecordOf(json: unknown): {
  description?: string;
  createdAt?: string;
  forkOf?: string;
  private?: boolean;
} {
  const v = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  const forkOf = v['forkOf'];
  return {
    ...(typeof v['description'] === 'string' ? { description: v['description'].slice(0, 3000) } : {}),
    ...(typeof v['createdAt'] === 'string' ? { createdAt: v['createdAt'] } : {}),
    // Its ref records are sealed (they never parse as refs): the pages say so instead of "empty".
    ...(typeof v['private'] === 'object' && v['private'] !== null ? { private: true } : {}),
    // Kept only when it names a repository record by DID: pages link to it and pull requests target it.
    ...(typeof forkOf === 'string' && parseAtUri(forkOf)?.collection === REPO_COLLECTION ? { forkOf } : {}),
  };
}

/**
 * The repository a ref record's, table's or table part's key belongs to: everything before the
 * first `~` (format.md: `<repo>~…` for each, and a repository name never holds one).
 */
export function repoOfKey(rkey: string): string {
  const i = rkey.indexOf('~');
  return i === -1 ? rkey : rkey.slice(0, i);
}
