import { REF_COLLECTION, REPO_COLLECTION } from 'knotless-core';
import { REFS_COLLECTION, REFS_PART_COLLECTION } from 'knotless-core/records/collections';
import { safeText } from 'knotless-core/text/terminal';
import type { EventSource, Index } from '../db/index-store.ts';
import type { LogFields } from '../log.ts';
import { repoOfKey } from '../model/records.ts';
import { InvalidRecord } from 'knotless-core/forge/records';
import { isForgeCollection, type ForgeCollection } from 'knotless-core/forge/kinds/table';
import { forgeRecords } from '../model/forge-records.ts';
import { refRecordOf, repoRecordOf } from '../model/records.ts';

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
 * Returns the repository whose mirror must catch up (its owner's DID and its name), or undefined
 * when nothing changed: a maintainer's table is one of the tables another account's repository's
 * refs are computed from.
 */
export async function applyWrite(
  index: Index,
  w: RecordWrite,
  source?: EventSource,
  log: (line: string, fields?: LogFields) => void = () => {},
): Promise<{ did: string; repo: string } | undefined> {
  if (isForgeCollection(w.collection)) {
    await applyForgeWrite(index, w, w.collection, source, log);
    return undefined;
  }
  if (w.collection === REPO_COLLECTION) {
    const record = w.record === null ? null : repoRecordOf(w.record);
    await index.applyRepo({ did: w.did, name: w.rkey, rev: w.rev, record, time: w.time }, source);
    // A private repository is never mirrored: its refs are sealed, there is nothing to fetch.
    return record?.private === true ? undefined : { did: w.did, repo: w.rkey };
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
    return changed ? { did: w.did, repo: repoOfKey(w.rkey) } : undefined;
  }
  if (w.collection === REFS_COLLECTION || w.collection === REFS_PART_COLLECTION) {
    const change = { did: w.did, rkey: w.rkey, rev: w.rev, cid: w.cid, record: w.record, time: w.time };
    const applied =
      w.collection === REFS_COLLECTION
        ? await index.applyRefTable(change, source)
        : await index.applyRefTablePart(change, source);
    if (applied.problem !== undefined)
      log(
        `the ref table of ${w.did}/${safeText(applied.repo ?? w.rkey, 200)} gives no listing (${applied.problem}); its last good refs are kept`,
      );
    // A maintainer's table the team's refs leave out: whose, of which repository, and why.
    for (const m of applied.memberProblems ?? []) {
      const repo = `${applied.owner ?? w.did}/${safeText(applied.repo ?? '', 200)}`;
      log(
        `the ref table maintainer ${m.maintainer} wrote for ${repo} breaks a rule (${m.problem}); the repository's refs are computed without it`,
        { account: m.maintainer, repo },
      );
    }
    return applied.changed && applied.repo !== undefined
      ? { did: applied.owner ?? w.did, repo: applied.repo }
      : undefined;
  }
  if (source !== undefined) await index.saveCursor(source);
  return undefined;
}

/**
 * A pull request, issue, state record or comment. A record its lexicon refuses is
 * skipped whole, with the reason logged, and counts as absent: an earlier valid version of it is
 * deleted from the index, as a later invalid version replaces it in its author's repository.
 */
async function applyForgeWrite(
  index: Index,
  w: RecordWrite,
  collection: ForgeCollection,
  source: EventSource | undefined,
  log: (line: string) => void,
): Promise<void> {
  let record = null;
  if (w.record !== null) {
    try {
      record = await forgeRecords.any(collection, w.record);
    } catch (err) {
      if (!(err instanceof InvalidRecord)) throw err;
      log(`skipping at://${w.did}/${collection}/${w.rkey}: ${err.why}`);
    }
  }
  await index.forge.apply(
    {
      did: w.did,
      collection,
      rkey: w.rkey,
      rev: w.rev,
      cid: record === null ? null : w.cid,
      record,
      time: w.time,
    },
    source,
  );
}
