// The authority rule (FORGE.md), applied whenever a pull request, an issue or one of their state
// records changes: the state kept in the pull request's or issue's row is worked out again from the
// state records that count.
import { sql, type Kysely, type Transaction } from 'kysely';
import {
  COMMENT_COLLECTION,
  ISSUE_COLLECTION,
  ISSUE_STATE_COLLECTION,
  PULL_COLLECTION,
  PULL_STATUS_COLLECTION,
  type ForgeCollection,
  type ForgeRecord,
} from '../ingest/forge-records.ts';
import type { Database } from './schema.ts';
import { decide, ISSUE_AUTHOR_MAY, PULL_AUTHOR_MAY, type Decision } from 'knotless-core';

type Db = Kysely<Database> | Transaction<Database>;

/** A forge record change: `record` null for a delete. */
export interface ForgeChange {
  did: string;
  collection: ForgeCollection;
  rkey: string;
  rev: string;
  cid: string | null;
  record: ForgeRecord | null;
  time: string;
}

/** Works out again the state of the pull request or issue a change touched. */
export async function refreshTarget(
  tx: Db,
  change: ForgeChange,
  old: Record<string, unknown> | undefined,
): Promise<void> {
  const r = change.record;
  switch (change.collection) {
    case PULL_COLLECTION:
      return refresh(tx, PULLS, change.did, change.rkey);
    case ISSUE_COLLECTION:
      return refresh(tx, ISSUES, change.did, change.rkey);
    case PULL_STATUS_COLLECTION:
      return refreshBoth(
        tx,
        PULLS,
        r?.collection === PULL_STATUS_COLLECTION ? r.record.pull : undefined,
        old,
      );
    case ISSUE_STATE_COLLECTION:
      return refreshBoth(
        tx,
        ISSUES,
        r?.collection === ISSUE_STATE_COLLECTION ? r.record.issue : undefined,
        old,
      );
    case COMMENT_COLLECTION:
      return;
  }
}

/**
 * Where one kind's items and state records are kept. Pull requests and issues follow one rule
 * through `decide`; only the tables, the columns naming the item and the state, what the author may
 * decide, and whether a merged commit is kept differ.
 */
interface Kind {
  items: 'pulls' | 'issues';
  states: 'pull_statuses' | 'issue_states';
  /** The state records' columns naming their item, and their state. */
  itemDid: 'pull_did' | 'issue_did';
  itemRkey: 'pull_rkey' | 'issue_rkey';
  state: 'status' | 'state';
  /** Pull requests keep the merged commit the owner named; issues have none. */
  merged: boolean;
  authorMay: readonly ('open' | 'closed')[];
}

const PULLS: Kind = {
  items: 'pulls',
  states: 'pull_statuses',
  itemDid: 'pull_did',
  itemRkey: 'pull_rkey',
  state: 'status',
  merged: true,
  authorMay: PULL_AUTHOR_MAY,
};

/** The same rule for an issue: the repository's owner, or the issue's author. */
const ISSUES: Kind = {
  items: 'issues',
  states: 'issue_states',
  itemDid: 'issue_did',
  itemRkey: 'issue_rkey',
  state: 'state',
  merged: false,
  authorMay: ISSUE_AUTHOR_MAY,
};

/** A state record's item now, and the one it named before (moved to another item, or deleted). */
async function refreshBoth(
  tx: Db,
  kind: Kind,
  target: { did: string; rkey: string } | undefined,
  old: Record<string, unknown> | undefined,
): Promise<void> {
  if (target !== undefined) await refresh(tx, kind, target.did, target.rkey);
  // A record that moved to another item (or was deleted) leaves its old one too.
  if (old !== undefined) await refresh(tx, kind, String(old[kind.itemDid]), String(old[kind.itemRkey]));
}

/** An item's state, labels and (for a pull request) merged commit, by knotless-core's `decide`. */
async function refresh(tx: Db, kind: Kind, did: string, rkey: string): Promise<void> {
  // Typed as one table each: both kinds' tables have the columns named here, under these names.
  const items = kind.items as 'pulls';
  const item = await tx
    .selectFrom(items)
    .select('repo_did')
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  if (item === undefined) return;
  const rows = await tx
    .selectFrom(kind.states as 'pull_statuses')
    .select(['did', 'rkey', 'labels', 'created_at'])
    .select(sql.ref<string>(kind.state).as('state'))
    .$if(kind.merged, (q) => q.select('merged'))
    .where(tx.dynamic.ref(kind.itemDid), '=', did)
    .where(tx.dynamic.ref(kind.itemRkey), '=', rkey)
    .where('deleted', '=', 0)
    .execute();
  const won = decide(decisions(rows), item.repo_did, did, kind.authorMay);
  await tx
    .updateTable(items)
    .set({
      state: won.state,
      labels: JSON.stringify(won.labels),
      ...(kind.merged ? { merged: won.merged ?? null } : {}),
    })
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .execute();
}

/** The rows of state records as `decide` reads them (labels are stored as JSON text). */
function decisions(
  rows: Array<{
    did: string;
    rkey: string;
    state: string;
    merged?: string | null;
    labels: string;
    created_at: string;
  }>,
): Decision<string>[] {
  return rows.map((r) => ({
    by: r.did,
    rkey: r.rkey,
    state: r.state,
    createdAt: r.created_at,
    ...(r.merged !== undefined && r.merged !== null ? { merged: r.merged } : {}),
    labels: JSON.parse(r.labels) as string[],
  }));
}
