// The authority rule (FORGE.md), applied whenever a pull request, an issue or one of their state
// records changes: the state kept in the pull request's or issue's row is worked out again from the
// state records that count.
import { sql, type Kysely, type Transaction } from 'kysely';
import type { ForgeTable } from 'knotless-core/forge/kinds/table';
import type { Database } from './schema.ts';
import { decide, ISSUE_AUTHOR_MAY, PULL_AUTHOR_MAY, type Decision } from 'knotless-core';
import { maintainersOfRepo } from './maintainers.ts';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * Works out again the state of the pull request or issue a write to `table` touched: the item
 * `did`/`rkey` itself, or the items a state record names now (`row`, as written; undefined for a
 * delete) and named before (`old`, the row it replaced: a record moved to another item, or deleted,
 * leaves its old one too).
 */
export async function refreshTarget(
  tx: Db,
  table: ForgeTable,
  did: string,
  rkey: string,
  row: Record<string, unknown> | undefined,
  old: Record<string, unknown> | undefined,
): Promise<void> {
  for (const kind of [PULLS, ISSUES]) {
    if (table === kind.items) return refresh(tx, kind, did, rkey);
    if (table !== kind.states) continue;
    for (const r of [row, old])
      if (r !== undefined) await refresh(tx, kind, String(r[kind.itemDid]), String(r[kind.itemRkey]));
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

/** An item's state, labels and (for a pull request) merged commit, by knotless-core's `decide`. */
async function refresh(tx: Db, kind: Kind, did: string, rkey: string): Promise<void> {
  // Typed as one table each: both kinds' tables have the columns named here, under these names.
  const items = kind.items as 'pulls';
  const item = await tx
    .selectFrom(items)
    .select(['repo_did', 'repo_name'])
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  if (item === undefined) return;
  const rows = await itemDecisions(tx, kind === PULLS ? 'pulls' : 'issues', did, rkey);
  // The team is the owner and the maintainers its table lists now (format.md, "The authority rule").
  const maintainers = (await maintainersOfRepo(tx, item.repo_did, item.repo_name)).map((m) => m.did);
  const won = decide(rows, { owner: item.repo_did, maintainers }, did, kind.authorMay);
  await tx
    .updateTable(items)
    .set({
      state: won.state,
      labels: JSON.stringify(won.labels),
      ...(kind.merged
        ? {
            merged: won.merged ?? null,
            ignored_checks: won.ignoredChecks === undefined ? null : JSON.stringify(won.ignoredChecks),
          }
        : {}),
    })
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .execute();
}

/** Every pull request and issue of a repository, worked out again: after who maintains it changed. */
export async function refreshRepoItems(tx: Db, repoDid: string, repoName: string): Promise<void> {
  for (const kind of [PULLS, ISSUES]) {
    const rows = await tx
      .selectFrom(kind.items as 'pulls')
      .select(['did', 'rkey'])
      .where('repo_did', '=', repoDid)
      .where('repo_name', '=', repoName)
      .where('deleted', '=', 0)
      .execute();
    for (const r of rows) await refresh(tx, kind, r.did, r.rkey);
  }
}

/** The accounts the index holds as not active (deactivated, taken down, suspended, deleted). */
export function inactiveDids(db: Db) {
  return db.selectFrom('owners').select('did').where('status', 'is not', null);
}

/**
 * The pull requests and issues an account's state records name, each worked out again: after the
 * account's status changed (its records count, or stop counting) or its rows were removed.
 */
export async function refreshTargets(tx: Db, targets: AccountTargets): Promise<void> {
  for (const kind of [PULLS, ISSUES])
    for (const t of targets[kind.items]) await refresh(tx, kind, t.did, t.rkey);
}

/** What an account's live state records name, by kind. */
export type AccountTargets = Record<'pulls' | 'issues', Array<{ did: string; rkey: string }>>;

/** The items an account's live state records name (read before its rows go, to refresh them after). */
export async function accountTargets(tx: Db, did: string): Promise<AccountTargets> {
  const out: AccountTargets = { pulls: [], issues: [] };
  for (const kind of [PULLS, ISSUES]) {
    const rows = await tx
      .selectFrom(kind.states as 'pull_statuses')
      .select([sql.ref<string>(kind.itemDid).as('item_did'), sql.ref<string>(kind.itemRkey).as('item_rkey')])
      .distinct()
      .where('did', '=', did)
      .where('deleted', '=', 0)
      .execute();
    out[kind.items] = rows.map((r) => ({ did: r.item_did, rkey: r.item_rkey }));
  }
  return out;
}

/** The live state records naming one pull request or issue, as `decide` reads them. */
export async function itemDecisions(
  tx: Db,
  items: 'pulls' | 'issues',
  did: string,
  rkey: string,
): Promise<Decision<string>[]> {
  const kind = items === 'pulls' ? PULLS : ISSUES;
  const rows = await tx
    .selectFrom(kind.states as 'pull_statuses')
    .select(['did', 'rkey', 'labels', 'created_at'])
    .select(sql.ref<string>(kind.state).as('state'))
    .$if(kind.merged, (q) => q.select(['merged', 'ignored_checks']))
    .where(tx.dynamic.ref(kind.itemDid), '=', did)
    .where(tx.dynamic.ref(kind.itemRkey), '=', rkey)
    .where('deleted', '=', 0)
    // The state records of an account that is not active decide nothing meanwhile (as its items
    // count nowhere); its status changing works its targets out again (`refreshAccountTargets`).
    .where('did', 'not in', inactiveDids(tx))
    .execute();
  return decisions(rows);
}

/** The rows of state records as `decide` reads them (labels are stored as JSON text). */
function decisions(
  rows: Array<{
    did: string;
    rkey: string;
    state: string;
    merged?: string | null;
    ignored_checks?: string | null;
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
    ...(r.ignored_checks !== undefined && r.ignored_checks !== null
      ? { ignoredChecks: JSON.parse(r.ignored_checks) as string[] }
      : {}),
    labels: JSON.parse(r.labels) as string[],
  }));
}
