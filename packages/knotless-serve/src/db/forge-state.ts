// The authority rule (FORGE.md), applied whenever a pull request, an issue or one of their state
// records changes: the state kept in the pull request's or issue's row is worked out again from the
// state records that count.
import type { Kysely, Transaction } from 'kysely';
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
      return refreshPull(tx, change.did, change.rkey);
    case ISSUE_COLLECTION:
      return refreshIssue(tx, change.did, change.rkey);
    case PULL_STATUS_COLLECTION: {
      const target = r?.collection === PULL_STATUS_COLLECTION ? r.record.pull : undefined;
      if (target !== undefined) await refreshPull(tx, target.did, target.rkey);
      // A record that moved to another pull request (or was deleted) leaves its old one too.
      if (old !== undefined) await refreshPull(tx, String(old['pull_did']), String(old['pull_rkey']));
      return;
    }
    case ISSUE_STATE_COLLECTION: {
      const target = r?.collection === ISSUE_STATE_COLLECTION ? r.record.issue : undefined;
      if (target !== undefined) await refreshIssue(tx, target.did, target.rkey);
      if (old !== undefined) await refreshIssue(tx, String(old['issue_did']), String(old['issue_rkey']));
      return;
    }
    case COMMENT_COLLECTION:
      return;
  }
}

/** The rows of state records as `decide` reads them (labels are stored as JSON text). */
function decisions<S extends string>(
  rows: Array<{
    did: string;
    rkey: string;
    state: S;
    merged?: string | null;
    labels: string;
    created_at: string;
  }>,
): Decision<S>[] {
  return rows.map((r) => ({
    by: r.did,
    rkey: r.rkey,
    state: r.state,
    createdAt: r.created_at,
    ...(r.merged !== undefined && r.merged !== null ? { merged: r.merged } : {}),
    labels: JSON.parse(r.labels) as string[],
  }));
}

/** A pull request's state, labels and merged commit, by the authority rule (knotless-core's `decide`). */
async function refreshPull(tx: Db, did: string, rkey: string): Promise<void> {
  const pull = await tx
    .selectFrom('pulls')
    .select('repo_did')
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  if (pull === undefined) return;
  const rows = await tx
    .selectFrom('pull_statuses')
    .select(['did', 'rkey', 'status as state', 'merged', 'labels', 'created_at'])
    .where('pull_did', '=', did)
    .where('pull_rkey', '=', rkey)
    .where('deleted', '=', 0)
    .execute();
  const won = decide(decisions(rows), pull.repo_did, did, PULL_AUTHOR_MAY);
  await tx
    .updateTable('pulls')
    .set({ state: won.state, merged: won.merged ?? null, labels: JSON.stringify(won.labels) })
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .execute();
}

/** The same rule for an issue: the repository's owner, or the issue's author. */
async function refreshIssue(tx: Db, did: string, rkey: string): Promise<void> {
  const issue = await tx
    .selectFrom('issues')
    .select('repo_did')
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  if (issue === undefined) return;
  const rows = await tx
    .selectFrom('issue_states')
    .select(['did', 'rkey', 'state', 'labels', 'created_at'])
    .where('issue_did', '=', did)
    .where('issue_rkey', '=', rkey)
    .where('deleted', '=', 0)
    .execute();
  const won = decide(decisions(rows), issue.repo_did, did, ISSUE_AUTHOR_MAY);
  await tx
    .updateTable('issues')
    .set({ state: won.state, labels: JSON.stringify(won.labels) })
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .execute();
}
