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

/**
 * The authority rule (FORGE.md): a status counts when written by the target repository's owner
 * (any status, labels), or by the pull request's author (only open or closed). The newest that
 * counts, by createdAt then record key, gives the state; labels come from the owner's newest.
 */
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
    .select(['did', 'status', 'merged', 'labels'])
    .where('pull_did', '=', did)
    .where('pull_rkey', '=', rkey)
    .where('deleted', '=', 0)
    .orderBy('created_at', 'desc')
    .orderBy('rkey', 'desc')
    .execute();
  const owner = pull.repo_did;
  const valid = rows.filter(
    (s) => s.did === owner || (s.did === did && (s.status === 'open' || s.status === 'closed')),
  );
  const top = valid[0];
  const labels = valid.find((s) => s.did === owner)?.labels ?? '[]';
  await tx
    .updateTable('pulls')
    .set({
      state: top?.status ?? 'open',
      merged: top?.status === 'merged' ? top.merged : null,
      labels,
    })
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
    .select(['did', 'state', 'labels'])
    .where('issue_did', '=', did)
    .where('issue_rkey', '=', rkey)
    .where('deleted', '=', 0)
    .orderBy('created_at', 'desc')
    .orderBy('rkey', 'desc')
    .execute();
  const owner = issue.repo_did;
  const valid = rows.filter((s) => s.did === owner || s.did === did);
  await tx
    .updateTable('issues')
    .set({ state: valid[0]?.state ?? 'open', labels: valid.find((s) => s.did === owner)?.labels ?? '[]' })
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .execute();
}
