import type { Kysely } from 'kysely';
import {
  COMMENT_COLLECTION,
  ISSUE_COLLECTION,
  ISSUE_STATE_COLLECTION,
  PULL_COLLECTION,
  PULL_STATUS_COLLECTION,
  type ForgeCollection,
  type ForgeRecord,
} from '../ingest/forge-records.ts';
import { saveCursor, type EventSource } from './cursor.ts';
import { refreshTarget, type ForgeChange } from './forge-state.ts';
import type { CommentTable, Database, IssueTable, PullTable } from './schema.ts';

type ForgeTable = 'pulls' | 'pull_statuses' | 'issues' | 'issue_states' | 'comments';

const TABLES: Record<ForgeCollection, ForgeTable> = {
  [PULL_COLLECTION]: 'pulls',
  [PULL_STATUS_COLLECTION]: 'pull_statuses',
  [ISSUE_COLLECTION]: 'issues',
  [ISSUE_STATE_COLLECTION]: 'issue_states',
  [COMMENT_COLLECTION]: 'comments',
};

export type { ForgeChange } from './forge-state.ts';

/** A row with its author's verified handle. */
export type WithHandle<T> = Omit<T, 'deleted'> & { handle: string | null };
export type PullRow = WithHandle<PullTable>;
export type IssueRow = WithHandle<IssueTable>;
export type CommentRow = WithHandle<CommentTable>;

/** Which pull requests or issues a list shows. */
export type StateFilter = 'open' | 'closed' | 'merged' | 'all';

/**
 * The forge's part of the index (issue 16): pull requests, issues, their state records and
 * comments. Writes are idempotent as the rest of the index is (a row keeps the revision that wrote
 * it; deletes are tombstones). A pull request's or issue's state is kept in its own row, worked out
 * again from its state records whenever either changes, by the authority rule: only the target
 * repository's owner, or the author for open/closed of their own, counts.
 */
export class ForgeStore {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Applies one forge record change, and the event's position, in one transaction. */
  async apply(change: ForgeChange, source?: EventSource): Promise<void> {
    await this.#db.transaction().execute(async (tx) => {
      const table = TABLES[change.collection];
      // Typed as one table: every forge table has the columns this write touches.
      const t = table as 'comments';
      const old = await tx
        .selectFrom(t)
        .selectAll()
        .where('did', '=', change.did)
        .where('rkey', '=', change.rkey)
        .executeTakeFirst();
      if (old === undefined || old.rev <= change.rev) {
        if (change.record === null) {
          if (old !== undefined)
            await tx
              .updateTable(t)
              .set({ deleted: 1, rev: change.rev, cid: null, indexed_at: change.time })
              .where('did', '=', change.did)
              .where('rkey', '=', change.rkey)
              .execute();
        } else {
          const row = rowOf(change, change.record);
          await tx
            .insertInto(t)
            .values(row as unknown as CommentTable)
            .onConflict((oc) => oc.columns(['did', 'rkey']).doUpdateSet(row))
            .execute();
        }
        await refreshTarget(tx, change, old);
      }
      if (source !== undefined) await saveCursor(tx, source);
    });
  }

  /** Every row key of one author in one collection, tombstones included (for a backfill). */
  async keys(
    collection: ForgeCollection,
    did: string,
  ): Promise<{ rkey: string; rev: string; deleted: number }[]> {
    return this.#db
      .selectFrom(TABLES[collection] as 'comments')
      .select(['rkey', 'rev', 'deleted'])
      .where('did', '=', did)
      .execute();
  }

  /** A repository's pull requests, newest first. */
  async pulls(
    repoDid: string,
    repoName: string,
    state: StateFilter,
    limit: number,
    offset = 0,
  ): Promise<PullRow[]> {
    let q = this.#db
      .selectFrom('pulls')
      .leftJoin('owners', 'owners.did', 'pulls.did')
      .selectAll('pulls')
      .select('owners.handle')
      .where('pulls.repo_did', '=', repoDid)
      .where('pulls.repo_name', '=', repoName)
      .where('pulls.deleted', '=', 0);
    if (state !== 'all') q = q.where('pulls.state', '=', state);
    return q
      .orderBy('pulls.created_at', 'desc')
      .orderBy('pulls.rkey', 'desc')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  /** One pull request, unless deleted or unknown. */
  async pull(did: string, rkey: string): Promise<PullRow | undefined> {
    return this.#db
      .selectFrom('pulls')
      .leftJoin('owners', 'owners.did', 'pulls.did')
      .selectAll('pulls')
      .select('owners.handle')
      .where('pulls.did', '=', did)
      .where('pulls.rkey', '=', rkey)
      .where('pulls.deleted', '=', 0)
      .executeTakeFirst();
  }

  /** A repository's issues, newest first. */
  async issues(
    repoDid: string,
    repoName: string,
    state: StateFilter,
    limit: number,
    offset = 0,
  ): Promise<IssueRow[]> {
    let q = this.#db
      .selectFrom('issues')
      .leftJoin('owners', 'owners.did', 'issues.did')
      .selectAll('issues')
      .select('owners.handle')
      .where('issues.repo_did', '=', repoDid)
      .where('issues.repo_name', '=', repoName)
      .where('issues.deleted', '=', 0);
    if (state !== 'all') q = q.where('issues.state', '=', state);
    return q
      .orderBy('issues.created_at', 'desc')
      .orderBy('issues.rkey', 'desc')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  /** One issue, unless deleted or unknown. */
  async issue(did: string, rkey: string): Promise<IssueRow | undefined> {
    return this.#db
      .selectFrom('issues')
      .leftJoin('owners', 'owners.did', 'issues.did')
      .selectAll('issues')
      .select('owners.handle')
      .where('issues.did', '=', did)
      .where('issues.rkey', '=', rkey)
      .where('issues.deleted', '=', 0)
      .executeTakeFirst();
  }

  /** The comments on a pull request or an issue, oldest first. */
  async comments(collection: string, did: string, rkey: string): Promise<CommentRow[]> {
    return this.#db
      .selectFrom('comments')
      .leftJoin('owners', 'owners.did', 'comments.did')
      .selectAll('comments')
      .select('owners.handle')
      .where('comments.subject_did', '=', did)
      .where('comments.subject_rkey', '=', rkey)
      .where('comments.subject_collection', '=', collection)
      .where('comments.deleted', '=', 0)
      .orderBy('comments.created_at')
      .orderBy('comments.rkey')
      .execute();
  }

  /** Open pull requests and issues of a repository, and how many of each in every state. */
  async counts(
    repoDid: string,
    repoName: string,
  ): Promise<{ pulls: Record<string, number>; issues: Record<string, number> }> {
    const count = async (table: 'pulls' | 'issues') => {
      const rows = await this.#db
        .selectFrom(table as 'pulls')
        .select((eb) => ['state', eb.fn.countAll<number | string>().as('n')])
        .where('repo_did', '=', repoDid)
        .where('repo_name', '=', repoName)
        .where('deleted', '=', 0)
        .groupBy('state')
        .execute();
      const out: Record<string, number> = { open: 0, closed: 0, merged: 0 };
      for (const r of rows) out[r.state] = Number(r.n);
      return out;
    };
    return { pulls: await count('pulls'), issues: await count('issues') };
  }
}

function rowOf(change: ForgeChange, r: ForgeRecord): Record<string, unknown> {
  const base = {
    did: change.did,
    rkey: change.rkey,
    cid: change.cid,
    rev: change.rev,
    deleted: 0,
    created_at: r.record.createdAt,
    indexed_at: change.time,
  };
  switch (r.collection) {
    case PULL_COLLECTION:
      return {
        ...base,
        repo_did: r.record.repo.did,
        repo_name: r.record.repo.rkey,
        base: r.record.base,
        head_repo: r.record.head.repo,
        head_branch: r.record.head.branch,
        title: r.record.title,
        body: r.record.body ?? null,
        rounds: JSON.stringify(r.record.rounds),
        // Worked out right after by refreshPull.
        state: 'open',
        merged: null,
        labels: '[]',
      };
    case PULL_STATUS_COLLECTION:
      return {
        ...base,
        pull_did: r.record.pull.did,
        pull_rkey: r.record.pull.rkey,
        status: r.record.status,
        merged: r.record.merged ?? null,
        labels: JSON.stringify(r.record.labels),
      };
    case ISSUE_COLLECTION:
      return {
        ...base,
        repo_did: r.record.repo.did,
        repo_name: r.record.repo.rkey,
        title: r.record.title,
        body: r.record.body ?? null,
        state: 'open',
        labels: '[]',
      };
    case ISSUE_STATE_COLLECTION:
      return {
        ...base,
        issue_did: r.record.issue.did,
        issue_rkey: r.record.issue.rkey,
        state: r.record.state,
        labels: JSON.stringify(r.record.labels),
      };
    case COMMENT_COLLECTION:
      return {
        ...base,
        subject_did: r.record.subject.did,
        subject_collection: r.record.subject.collection,
        subject_rkey: r.record.subject.rkey,
        round: r.record.round ?? null,
        body: r.record.body,
      };
  }
}
