import { REF_COLLECTION, REPO_COLLECTION } from 'knotless-core';
import type { EventSource, Index } from '../db/index-store.ts';
import { repoOfKey } from '../db/index-store.ts';
import { refRecordOf, repoRecordOf } from './records.ts';

/** One record write seen on a stream or in a listing. */
export interface RecordWrite {
  did: string;
  collection: string;
  rkey: string;
  rev: string;
  cid: string | null;
  /** The record in JSON form; null for a delete. */
  record: unknown;
  time: string;
}

/**
 * Applies one knotless record write to the index, with the stream position when there is one.
 * Returns the repository whose mirror must catch up, or undefined when nothing changed.
 */
export async function applyWrite(
  index: Index,
  w: RecordWrite,
  source?: EventSource,
): Promise<string | undefined> {
  if (w.collection === REPO_COLLECTION) {
    const record = w.record === null ? null : repoRecordOf(w.record);
    await index.applyRepo({ did: w.did, name: w.rkey, rev: w.rev, record, time: w.time }, source);
    return w.rkey;
  }
  if (w.collection === REF_COLLECTION) {
    const record = w.record === null ? null : refRecordOf(w.record);
    if (record === undefined) {
      // An invalid record counts as absent, as it does for the helper.
      if (source !== undefined) await index.saveCursor(source);
      return undefined;
    }
    const changed = await index.applyRef(
      { did: w.did, rkey: w.rkey, rev: w.rev, cid: w.cid, record, time: w.time },
      source,
    );
    return changed ? repoOfKey(w.rkey) : undefined;
  }
  if (source !== undefined) await index.saveCursor(source);
  return undefined;
}
