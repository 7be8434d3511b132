import type { Kysely } from 'kysely';
import {
  CHECK,
  repoUri,
  type BranchProtection,
  type CheckRecord,
  type ProtectionRecord,
} from 'knotless-core/forge/records';
import {
  forgeRow,
  kindOf,
  uriOf,
  type ForgeCollection,
  type ForgeRecord,
  type ForgeTable,
} from 'knotless-core/forge/kinds/table';
import { saveCursor, type EventSource } from './cursor.ts';
import { itemStates, queueCheck, queueForgeEvents, type Item } from './webhook-events.ts';
import { inactiveDids, itemDecisions, refreshTarget } from './forge-state.ts';
import { shortIds, type Decision } from 'knotless-core';
import {
  latestVerdicts,
  protectionKey,
  repoProtection,
  type ListedCheck,
  type RepoProtection,
} from 'knotless-core/forge/checks';
import { maintainersOfRepo } from './maintainers.ts';
import { indexMentions } from './mentions.ts';
import type { StateFilter } from '../model/states.ts';
import type { CheckTable, CommentTable, Database, IssueTable, PullTable } from './schema.ts';

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

/** A row with its author's verified handle. */
export type WithHandle<T> = Omit<T, 'deleted'> & { handle: string | null };
export type PullRow = WithHandle<PullTable>;
export type IssueRow = WithHandle<IssueTable>;
export type CommentRow = WithHandle<CommentTable>;

/** A page of a repository's pull requests or issues in one state. */
type ListArgs = [repoDid: string, repoName: string, state: StateFilter, limit: number, offset?: number];

/**
 * The forge's part of the index: pull requests, issues, their state records and
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
      const table = kindOf(change.collection).table;
      // Typed as one table: every forge table has the columns this write touches.
      const t = table as 'comments';
      const old = await tx
        .selectFrom(t)
        .selectAll()
        .where('did', '=', change.did)
        .where('rkey', '=', change.rkey)
        .executeTakeFirst();
      if (old === undefined || old.rev <= change.rev) {
        const row = change.record === null ? undefined : forgeRow(change, change.record);
        if (change.record?.collection === CHECK && row !== undefined) {
          await replaceVerdict(tx, change.did, change.rkey, change.record.record, row);
          if (source !== undefined) await saveCursor(tx, source);
          return;
        }
        const items = touchedItems(table, change, row, old);
        const before = await itemStates(tx, items);
        if (row === undefined) {
          if (old !== undefined)
            await tx
              .updateTable(t)
              .set({ deleted: 1, rev: change.rev, cid: null, indexed_at: change.time })
              .where('did', '=', change.did)
              .where('rkey', '=', change.rkey)
              .execute();
        } else {
          await tx
            .insertInto(t)
            .values(row as unknown as CommentTable)
            .onConflict((oc) => oc.columns(['did', 'rkey']).doUpdateSet(row))
            .execute();
        }
        if (table === 'pulls' || table === 'issues' || table === 'comments')
          await indexMentions(
            tx,
            table,
            change.did,
            change.rkey,
            (row as { body?: string | null } | undefined)?.body,
          );
        await refreshTarget(tx, table, change.did, change.rkey, row, old);
        await queueForgeEvents(tx, change, table, row, old, items, before);
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
      .selectFrom(kindOf(collection).table as 'comments')
      .select(['rkey', 'rev', 'deleted'])
      .where('did', '=', did)
      .execute();
  }

  /** A repository's pull requests, newest first. */
  async pulls(...list: ListArgs): Promise<PullRow[]> {
    return (await this.#list('pulls', ...list)) as PullRow[];
  }

  /** One pull request, unless deleted or unknown. */
  /** The live state records on one pull request or issue: what a new one is decided against. */
  decisions(items: 'pulls' | 'issues', did: string, rkey: string): Promise<Decision<string>[]> {
    return itemDecisions(this.#db, items, did, rkey);
  }

  async pull(did: string, rkey: string): Promise<PullRow | undefined> {
    return (await this.#one('pulls', did, rkey)) as PullRow | undefined;
  }

  /** A repository's issues, newest first. */
  async issues(...list: ListArgs): Promise<IssueRow[]> {
    return this.#list('issues', ...list);
  }

  /** One issue, unless deleted or unknown. */
  async issue(did: string, rkey: string): Promise<IssueRow | undefined> {
    return this.#one('issues', did, rkey);
  }

  /**
   * Pull requests or issues with their authors' handles. Typed as the issues table, whose columns
   * the pulls table has too; `pulls` and `pull` give the rows their own type back.
   */
  #items(table: 'pulls' | 'issues') {
    const t = table as 'issues';
    return (
      this.#db
        .selectFrom(t)
        .leftJoin('owners', 'owners.did', `${t}.did`)
        .selectAll(t)
        .select('owners.handle')
        .where(`${t}.deleted`, '=', 0)
        // The records of an account that is not active are hidden from every page meanwhile.
        .where('owners.status', 'is', null)
    );
  }

  async #list(
    table: 'pulls' | 'issues',
    ...[repoDid, repoName, state, limit, offset = 0]: ListArgs
  ): Promise<IssueRow[]> {
    const t = table as 'issues';
    let q = this.#items(t).where(`${t}.repo_did`, '=', repoDid).where(`${t}.repo_name`, '=', repoName);
    if (state !== 'all') q = q.where(`${t}.state`, '=', state);
    return q
      .orderBy(`${t}.created_at`, 'desc')
      .orderBy(`${t}.rkey`, 'desc')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  /**
   * The short id of each of a repository's pull requests or issues (every state), by record key:
   * knotless-core's rule, over the keys the CLI's listing sees too.
   */
  async shortIds(table: 'pulls' | 'issues', repoDid: string, repoName: string): Promise<Map<string, string>> {
    const t = table as 'issues';
    const rows = await this.#items(t)
      .where(`${t}.repo_did`, '=', repoDid)
      .where(`${t}.repo_name`, '=', repoName)
      .execute();
    return shortIds(rows.map((r) => r.rkey));
  }

  async #one(table: 'pulls' | 'issues', did: string, rkey: string): Promise<IssueRow | undefined> {
    const t = table as 'issues';
    return this.#items(t).where(`${t}.did`, '=', did).where(`${t}.rkey`, '=', rkey).executeTakeFirst();
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
      .where('owners.status', 'is', null)
      .orderBy('comments.created_at')
      .orderBy('comments.rkey')
      .execute();
  }

  /**
   * How many accounts star a repository: one each, however many star records they keep; an account
   * that is not active counts for nothing meanwhile, as its other records show nowhere.
   */
  async stars(repoDid: string, repoName: string): Promise<number> {
    const row = await this.#db
      .selectFrom('stars')
      .leftJoin('owners', 'owners.did', 'stars.did')
      .select((eb) => eb.fn.count<number | string>('stars.did').distinct().as('n'))
      .where('stars.subject_did', '=', repoDid)
      .where('stars.subject_name', '=', repoName)
      .where('stars.deleted', '=', 0)
      .where('owners.status', 'is', null)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** The keys of `did`'s live star records on a repository (none when it does not star it). */
  async starsBy(did: string, repoDid: string, repoName: string): Promise<string[]> {
    const rows = await this.#db
      .selectFrom('stars')
      .select('rkey')
      .where('did', '=', did)
      .where('subject_did', '=', repoDid)
      .where('subject_name', '=', repoName)
      .where('deleted', '=', 0)
      .execute();
    return rows.map((r) => r.rkey);
  }

  /** Open pull requests and issues of a repository, and how many of each in every state. */
  async counts(
    repoDid: string,
    repoName: string,
  ): Promise<{ pulls: Record<string, number>; issues: Record<string, number> }> {
    const count = async (table: 'pulls' | 'issues') => {
      // An account that is not active counts for nothing meanwhile, as its items show nowhere.
      const rows = await this.#db
        .selectFrom(table as 'pulls')
        .select((eb) => ['state', eb.fn.countAll<number | string>().as('n')])
        .where('repo_did', '=', repoDid)
        .where('repo_name', '=', repoName)
        .where('deleted', '=', 0)
        .where('did', 'not in', inactiveDids(this.#db))
        .groupBy('state')
        .execute();
      const out: Record<string, number> = { open: 0, closed: 0, merged: 0 };
      for (const r of rows) out[r.state] = Number(r.n);
      return out;
    };
    return { pulls: await count('pulls'), issues: await count('issues') };
  }

  /**
   * A commit's checks in a repository, as knotless-core's rules read them, each with its runner's
   * verified handle: every verdict of the accounts in `counted` (the owner and the runners its
   * protection trusts: what a merge is judged by is never crowded out), and of the others at most
   * `limit`, by context, and how many of theirs were left out: counted up to `countTo` past
   * `limit` (`atLeast` beyond), so a flood of them costs a bounded read and a bounded count. An
   * account that is not active is left out, as everywhere.
   */
  async checks(
    repoDid: string,
    repoName: string,
    sha: string,
    counted: readonly string[],
    limit: number,
    countTo: number,
  ): Promise<{
    rows: Array<{ check: ListedCheck; handle: string | null }>;
    left: { count: number; atLeast: boolean };
  }> {
    const base = this.#db
      .selectFrom('checks')
      .leftJoin('owners', 'owners.did', 'checks.did')
      .selectAll('checks')
      .select('owners.handle')
      .where('checks.repo_did', '=', repoDid)
      .where('checks.repo_name', '=', repoName)
      .where('checks.sha', '=', sha)
      .where('checks.deleted', '=', 0)
      .where('owners.status', 'is', null);
    const mine = counted.length === 0 ? [] : await base.where('checks.did', 'in', [...counted]).execute();
    const strangers = counted.length === 0 ? base : base.where('checks.did', 'not in', [...counted]);
    const others = await strangers.orderBy('checks.context').orderBy('checks.did').limit(limit).execute();
    // Counted only when the page is full, and only so far: the rows past `limit + countTo` are
    // never read, and the count then says "at least".
    const total =
      others.length < limit
        ? others.length
        : Number(
            (
              await this.#db
                .selectFrom(strangers.limit(limit + countTo + 1).as('o'))
                .select((eb) => eb.fn.countAll().as('n'))
                .executeTakeFirstOrThrow()
            ).n,
          );
    const left = {
      count: Math.min(total, limit + countTo) - others.length,
      atLeast: total > limit + countTo,
    };
    const rows = [...mine, ...others].map((r) => ({
      check: {
        runner: r.did,
        rkey: r.rkey,
        record: {
          repo: repoUri(r.repo_did, r.repo_name),
          commit: r.sha,
          context: r.context,
          state: r.state as CheckRecord['state'],
          ...(r.target_url === null ? {} : { targetUrl: r.target_url }),
          ...(r.description === null ? {} : { description: r.description }),
          createdAt: r.created_at,
        },
      },
      handle: r.handle,
    }));
    return { rows, left };
  }

  /** `repoDid`'s repository `repoName`'s protection as the index has it: {@link indexedProtection}. */
  async protection(repoDid: string, repoName: string): Promise<RepoProtection> {
    return indexedProtection(this.#db, repoDid, repoName);
  }
}

/**
 * A repository's protection as the index has it, by knotless-core's rule (repoProtection): the
 * owner's record, keyed by the repository's name, and those of the maintainers the owner's table
 * lists now (the last list the index holds), each under its key in its own account; anybody
 * else's protection records are indexed and count for nothing. One query for the maintainers and
 * one for their records.
 */
export async function indexedProtection(
  db: Kysely<Database>,
  repoDid: string,
  repoName: string,
): Promise<RepoProtection> {
  const maintainers = (await maintainersOfRepo(db, repoDid, repoName)).map((m) => m.did);
  const writers = [repoDid, ...maintainers];
  const keys = [...new Set(writers.map((w) => protectionKey(repoName, repoDid, w)))];
  const rows = await db
    .selectFrom('protections')
    .selectAll()
    .where('did', 'in', writers)
    .where('rkey', 'in', keys)
    .where('deleted', '=', 0)
    .execute();
  const listed = rows.map((r) => ({
    did: r.did,
    rkey: r.rkey,
    record: {
      repo: r.repo,
      branches: JSON.parse(r.branches) as BranchProtection[],
      createdAt: r.created_at,
    } satisfies ProtectionRecord,
  }));
  return repoProtection(listed, repoUri(repoDid, repoName), maintainers);
}

type Tx = Parameters<Parameters<ReturnType<Kysely<Database>['transaction']>['execute']>[0]>[0];

/**
 * A check is kept only while it is its runner's verdict (knotless-core's latestVerdicts): the
 * runner's other checks on the same context of the same commit are deleted when this one replaces
 * them, and a check they already replace is not kept, so a runner re-running a check, however
 * often, leaves one row.
 */
async function replaceVerdict(
  tx: Tx,
  did: string,
  rkey: string,
  record: CheckRecord,
  row: Record<string, unknown>,
): Promise<void> {
  const repo = uriOf(record.repo);
  const same = await tx
    .selectFrom('checks')
    .select(['rkey', 'state'])
    .where('did', '=', did)
    .where('repo_did', '=', repo.did)
    .where('repo_name', '=', repo.rkey)
    .where('sha', '=', record.commit)
    .where('context', '=', record.context)
    .where('deleted', '=', 0)
    .execute();
  const listed = (k: string): ListedCheck => ({ runner: did, rkey: k, record });
  const won = latestVerdicts([...same.map((r) => listed(r.rkey)), listed(rkey)])[0]!.rkey;
  const replaced = same.map((r) => r.rkey).filter((k) => k !== won);
  if (won !== rkey) replaced.push(rkey);
  if (replaced.length > 0)
    await tx.deleteFrom('checks').where('did', '=', did).where('rkey', 'in', replaced).execute();
  if (won === rkey) {
    await tx
      .insertInto('checks')
      .values(row as unknown as CheckTable)
      .onConflict((oc) => oc.columns(['did', 'rkey']).doUpdateSet(row))
      .execute();
    // The runner's verdict before this one (this record itself, seen again): an event only when
    // the state changed.
    const before = same.find((r) => r.rkey === rkey) ?? same[0];
    if (before?.state !== record.state)
      await queueCheck(tx, {
        did,
        rkey,
        record,
        repoDid: repo.did,
        repoName: repo.rkey,
        before: before?.state ?? null,
      });
  }
}

/** The pull requests and issues a write to `table` may change the state of (webhooks' events). */
function touchedItems(
  table: ForgeTable,
  change: ForgeChange,
  row: Record<string, unknown> | undefined,
  old: object | undefined,
): Item[] {
  if (table === 'pulls' || table === 'issues') return [{ kind: table, did: change.did, rkey: change.rkey }];
  const [kind, didCol, rkeyCol] =
    table === 'pull_statuses'
      ? (['pulls', 'pull_did', 'pull_rkey'] as const)
      : table === 'issue_states'
        ? (['issues', 'issue_did', 'issue_rkey'] as const)
        : [];
  if (kind === undefined) return [];
  const out: Item[] = [];
  for (const r of [row, old as Record<string, unknown> | undefined]) {
    if (r === undefined) continue;
    const it: Item = { kind, did: String(r[didCol]), rkey: String(r[rkeyCol]) };
    if (!out.some((o) => o.did === it.did && o.rkey === it.rkey)) out.push(it);
  }
  return out;
}
