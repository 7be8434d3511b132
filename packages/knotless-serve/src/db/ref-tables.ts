// Ref tables (`dev.knotless.refs` and `.part`, format.md "The ref table") in the index. An account's
// own table of its own repository gives that repository's refs, and from the moment it exists its
// `dev.knotless.ref` records are ignored (the reader's rule, "Old repositories"); a maintainer's
// table of another account's repository is stored, and counts, while the owner's table lists them,
// towards the team's refs the rule computes when the repository is read (`liveRefs`). The refs an
// owner's table gives are kept in `table_refs`, replaced only by a listing the table and its parts
// give whole: a table that breaks a rule, or whose part is missing or not the one it names, leaves
// the last good refs in place and its problem in `ref_tables.problem` (a maintainer's such table is
// left out of the team's refs, its problem kept there too). A push is what changes, between before
// a table write and after it, in the repository's refs as readers are shown them.
import type { Kysely, Transaction } from 'kysely';
import { isKnotlessError, REPO_COLLECTION } from 'knotless-core';
import {
  joinRefTable,
  parseRefTable,
  refTableKey,
  type FetchedPart,
  type RefTable,
} from 'knotless-core/records/ref-table';
import { maintainerList } from 'knotless-core/records/maintainers';
import { divergentName, teamTable } from 'knotless-core/records/read-refs';
import { teamRefs } from 'knotless-core/records/team-refs';
import { packsJson } from '../model/packs.ts';
import { repoOfKey } from '../model/records.ts';
import { refreshRepoItems } from './forge-state.ts';
import { maintainersOfRepo, type Maintainer } from './maintainers.ts';
import type { EventSource } from './cursor.ts';
import type { Database, RefTableRow, TableRefRow } from './schema.ts';
import { queuePush } from './webhook-events.ts';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * A ref as the index lists it, from a ref record or a table; `diverged` on a team's value the rule
 * did not choose, listed apart (`refs/maintainers/<who>/…`): the ref it is a value of, and whose.
 */
export type ListedRef = Omit<TableRefRow, 'did' | 'repo'> & {
  did: string;
  repo: string;
  diverged?: { ref: string; who: string };
};

/** A table or part record change: `record` null for a delete. */
export interface TableChange {
  did: string;
  rkey: string;
  rev: string;
  cid: string | null;
  /** The record in JSON form. */
  record: unknown;
  time: string;
}

/** What applying a table or a part did: whether the repository's refs changed, and why not when refused. */
export interface TableApplied {
  /** The repository whose refs the change is about (undefined: none, e.g. a table of no one's). */
  repo?: string;
  /** Its owner, when the change is a maintainer's table of another account's repository. */
  owner?: string;
  changed: boolean;
  /** Set when the owner's table gives no listing now (its last good refs are kept). */
  problem?: string;
  /**
   * Maintainers' tables of the repository that break a rule, each said once per record version:
   * the repository's refs are computed without them, as a reader leaves out a table it cannot read.
   */
  memberProblems?: { maintainer: string; problem: string }[];
}

/** The owner's live table of `did`'s repository `repo`, if it has one. */
async function ownerTable(db: Db, did: string, repo: string): Promise<RefTableRow | undefined> {
  return db
    .selectFrom('ref_tables')
    .selectAll()
    .where('did', '=', did)
    .where('rkey', '=', repo)
    .where('deleted', '=', 0)
    .executeTakeFirst();
}

/** Whether `did`'s repository `repo` keeps its refs in a table (its ref records then count for nothing). */
export async function hasOwnerTable(db: Db, did: string, repo: string): Promise<boolean> {
  return (await ownerTable(db, did, repo)) !== undefined;
}

/**
 * The live refs of a repository (HEAD included), in name order: its table's, else its ref records'.
 * A repository whose owner's table names maintainers has the refs the team's rule computes
 * ({@link teamListing}); a ref whose value is a maintainer's has their DID as `did` (their account
 * holds its packs).
 */
export async function liveRefs(db: Db, did: string, repo: string): Promise<ListedRef[]> {
  const table = await ownerTable(db, did, repo);
  if (table !== undefined) {
    const own = await db
      .selectFrom('table_refs')
      .selectAll()
      .where('did', '=', did)
      .where('repo', '=', repo)
      .orderBy('ref')
      .execute();
    const maintainers = await maintainersOfRepo(db, did, repo);
    return maintainers.length === 0 ? own : teamListing(db, table, own, maintainers);
  }
  return db
    .selectFrom('refs')
    .select(['did', 'rkey', 'repo', 'ref', 'target', 'symref', 'peeled', 'packs', 'cid', 'rev', 'updated_at'])
    .where('did', '=', did)
    .where('repo', '=', repo)
    .where('deleted', '=', 0)
    .orderBy('ref')
    .execute();
}

/** Parts are read this many at a time (bound parameters stay far below every engine's limit). */
const PART_BATCH = 500;

/**
 * A table's value (of `did`'s account) joined with the parts the index holds, checked by the
 * table's rules for the repository `uri` (as its owner's, or a maintainer's): refused, corrupt-remote.
 */
async function joinedTable(
  db: Db,
  did: string,
  value: unknown,
  uri: string,
  owner: boolean,
): Promise<RefTable> {
  const stored = parseRefTable(value, uri, owner);
  const keys = stored.parts.map((p) => p.rkey);
  const parts: FetchedPart[] = [];
  for (let i = 0; i < keys.length; i += PART_BATCH) {
    const rows = await db
      .selectFrom('ref_table_parts')
      .select(['rkey', 'cid', 'value'])
      .where('did', '=', did)
      .where('rkey', 'in', keys.slice(i, i + PART_BATCH))
      .where('deleted', '=', 0)
      .execute();
    for (const p of rows)
      if (p.cid !== null && p.value !== null)
        parts.push({ rkey: p.rkey, cid: p.cid, value: JSON.parse(p.value) as unknown });
  }
  return joinRefTable(stored, parts);
}

/** A value's JSON, or undefined for a private repository's sealed table (it gives no refs to index). */
function openValue(json: string | null): unknown {
  const value = JSON.parse(json ?? 'null') as unknown;
  return typeof value === 'object' && value !== null && 'sealed' in value ? undefined : value;
}

/**
 * The team's refs of the owner's repository (format.md, "Teams"), computed with knotless-core's
 * `teamRefs` from the owner's table and the tables of the maintainers the owner's table lists now,
 * each read only from the maintainer's own account under the key the format gives it: a table of
 * that shape in any other account counts for nothing, and a maintainer dropped from the list stops
 * counting at once. A maintainer's table that breaks a rule, or is sealed, is left out, as a reader
 * leaves out one it cannot read. A value no entry supersedes is listed apart as
 * `refs/maintainers/<handle>/…` (the handle the index verified, else the DID), as readers list it.
 */
async function teamListing(
  db: Db,
  row: RefTableRow,
  own: ListedRef[],
  maintainers: Maintainer[],
): Promise<ListedRef[]> {
  const owner = row.did;
  const uri = `at://${owner}/${REPO_COLLECTION}/${row.repo}`;
  const ownValue = openValue(row.value);
  if (ownValue === undefined) return own;
  let ownTable: RefTable;
  try {
    ownTable = await joinedTable(db, owner, ownValue, uri, true);
  } catch (err) {
    // The owner's table gives no listing now: its last good refs stand alone, as indexed.
    if (isKnotlessError(err, 'corrupt-remote')) return own;
    throw err;
  }
  const dids = maintainers.map((m) => m.did);
  const keys = [...new Set(dids.map((d) => refTableKey(row.repo, owner, d)))];
  const rows = await db
    .selectFrom('ref_tables')
    .leftJoin('owners', 'owners.did', 'ref_tables.did')
    .select([
      'ref_tables.did',
      'ref_tables.rkey',
      'ref_tables.value',
      'ref_tables.cid',
      'ref_tables.rev',
      'owners.handle',
    ])
    .where('ref_tables.did', 'in', dids)
    .where('ref_tables.rkey', 'in', keys)
    .where('ref_tables.deleted', '=', 0)
    .execute();
  interface Writer {
    did: string;
    name: string;
    table: RefTable;
    at: { rkey: string; cid: string | null; rev: string };
  }
  const writers = new Map<string, Writer>();
  for (const r of rows) {
    // Whose account a table is in says who wrote it: only the key of that account's own table counts.
    if (refTableKey(row.repo, owner, r.did) !== r.rkey) continue;
    const value = openValue(r.value);
    if (value === undefined) continue;
    try {
      const table = await joinedTable(db, r.did, value, uri, false);
      writers.set(r.did, { did: r.did, name: r.handle ?? r.did, table, at: r });
    } catch (err) {
      if (!isKnotlessError(err, 'corrupt-remote')) throw err;
    }
  }
  if (writers.size === 0) return own;
  const computed = teamRefs(owner, [
    teamTable(owner, ownTable),
    ...[...writers.values()].map((w) => teamTable(w.did, w.table)),
  ]);
  const ownByRef = new Map(own.map((r) => [r.ref, r]));
  const listedAs = (ref: string, name: string, did: string): ListedRef | undefined => {
    if (did === owner) {
      const mine = ownByRef.get(ref);
      return mine === undefined ? undefined : { ...mine, ref: name };
    }
    const w = writers.get(did);
    const e = w?.table.refs.find((x) => x.ref === ref);
    if (w === undefined || e?.target === undefined) return undefined;
    return {
      did,
      repo: row.repo,
      rkey: `${w.at.rkey}#${ref}`,
      ref: name,
      target: e.target,
      symref: null,
      peeled: e.peeled ?? null,
      packs: packsJson(e.packs),
      cid: w.at.cid,
      rev: w.at.rev,
      updated_at: w.table.updatedAt,
    };
  };
  const out: ListedRef[] = own.filter((r) => r.ref === 'HEAD');
  for (const [ref, value] of computed) {
    if (value.target === undefined) continue;
    const chosen = listedAs(ref, ref, value.by);
    if (chosen !== undefined) out.push(chosen);
    for (const d of value.divergent ?? []) {
      if (d.target === undefined) continue;
      const who = writers.get(d.did)?.name ?? owner;
      const shown = listedAs(ref, divergentName(who, ref), d.did);
      if (shown !== undefined) out.push({ ...shown, diverged: { ref, who } });
    }
  }
  return out.sort((a, b) => (a.ref < b.ref ? -1 : a.ref > b.ref ? 1 : 0));
}

/**
 * The listing the owner's table row gives with the parts the index holds, or why it gives none.
 * Only a refusal of the table's rules (corrupt-remote) is a problem; anything else is our fault.
 */
async function listingOf(
  db: Db,
  row: RefTableRow,
): Promise<{ refs: ListedRef[]; maintainers: Maintainer[] } | { problem: string }> {
  const value = JSON.parse(row.value ?? 'null') as unknown;
  // A private repository's table is sealed whole, as its ref records are: like them, it gives no
  // refs to index (the repository's pages say its contents are encrypted), and that is no problem.
  if (typeof value === 'object' && value !== null && 'sealed' in value) return { refs: [], maintainers: [] };
  let table: RefTable;
  try {
    table = await joinedTable(db, row.did, value, `at://${row.did}/${REPO_COLLECTION}/${row.repo}`, true);
  } catch (err) {
    if (isKnotlessError(err, 'corrupt-remote')) return { problem: err.message };
    throw err;
  }
  const at = { did: row.did, repo: row.repo, cid: row.cid, rev: row.rev, updated_at: table.updatedAt };
  const refs: ListedRef[] = [];
  if (table.head !== undefined)
    refs.push({
      ...at,
      rkey: `${row.rkey}#HEAD`,
      ref: 'HEAD',
      target: null,
      symref: table.head,
      peeled: null,
      packs: '[]',
    });
  for (const r of table.refs) {
    // An owner's table holds no tombstones (parseRefTable refuses them); a value is all it lists.
    if (r.target === undefined) continue;
    refs.push({
      ...at,
      rkey: `${row.rkey}#${r.ref}`,
      ref: r.ref,
      target: r.target,
      symref: null,
      peeled: r.peeled ?? null,
      packs: packsJson(r.packs),
    });
  }
  const maintainers = maintainerList(table, row.did);
  return { refs, maintainers };
}

/**
 * Keeps the repository's maintainers as `now` lists them; when who maintains it changed, every pull
 * request and issue of the repository is decided again (a maintainer's records count, or stop).
 */
async function writeMaintainers(tx: Db, did: string, repo: string, now: Maintainer[]): Promise<boolean> {
  const held = await maintainersOfRepo(tx, did, repo);
  const same =
    held.length === now.length && held.every((m, i) => m.did === now[i]!.did && m.since === now[i]!.since);
  if (same) return false;
  await tx.deleteFrom('repo_maintainers').where('did', '=', did).where('repo', '=', repo).execute();
  if (now.length > 0)
    await tx
      .insertInto('repo_maintainers')
      .values(now.map((m, position) => ({ did, repo, maintainer: m.did, since: m.since, position })))
      .execute();
  const before = new Set(held.map((m) => m.did));
  const after = new Set(now.map((m) => m.did));
  if (before.size !== after.size || [...before].some((d) => !after.has(d))) {
    await refreshRepoItems(tx, did, repo);
    return true;
  }
  return false;
}

/** Whether two listed refs say the same (a table's newer revision that left a ref alone keeps its row). */
function same(a: ListedRef, b: ListedRef): boolean {
  return a.target === b.target && a.symref === b.symref && a.peeled === b.peeled && a.packs === b.packs;
}

/** Writes the repository's `table_refs` from what they hold (`held`) to `now`: only the rows that differ. */
async function writeRows(
  tx: Db,
  did: string,
  repo: string,
  held: ListedRef[],
  now: ListedRef[],
): Promise<void> {
  const old = new Map(held.map((r) => [r.ref, r]));
  const keep = new Set(now.map((r) => r.ref));
  for (const ref of old.keys())
    if (!keep.has(ref))
      await tx
        .deleteFrom('table_refs')
        .where('did', '=', did)
        .where('repo', '=', repo)
        .where('ref', '=', ref)
        .execute();
  for (const r of now) {
    const was = old.get(r.ref);
    if (was !== undefined && same(was, r)) continue;
    const row: TableRefRow = { ...r, did, repo };
    await tx
      .insertInto('table_refs')
      .values(row)
      .onConflict((oc) =>
        oc.columns(['did', 'repo', 'ref']).doUpdateSet({
          rkey: row.rkey,
          target: row.target,
          symref: row.symref,
          peeled: row.peeled,
          packs: row.packs,
          cid: row.cid,
          rev: row.rev,
          updated_at: row.updated_at,
        }),
      )
      .execute();
  }
}

/** Who wrote the table whose change is being applied: its key, and the maintainer's DID (null: the owner). */
interface Writer {
  key: string;
  pusher: string | null;
}

/**
 * Notes each ref whose target moved between two listings as a push (keyed by the writer's table key
 * and the ref, and the revision that moved it, so the same event seen again notes nothing) and
 * queues its webhooks' deliveries. The listings are the repository's as readers see it, a team's
 * computed by the rule: a value listed apart (`refs/maintainers/<who>/…`, a diverged value the rule
 * did not choose) moved no branch, so it notes no push and sends nothing, and a write that leaves
 * the team's value of a ref where it was notes nothing for it. True when any ref (HEAD, a pack list,
 * a diverged value too) changed.
 */
async function notePushes(
  tx: Db,
  did: string,
  repo: string,
  before: ListedRef[],
  after: ListedRef[],
  at: { rev: string; time: string; seq: number | null },
  writer: Writer = { key: repo, pusher: null },
): Promise<boolean> {
  const old = new Map(before.map((r) => [r.ref, r]));
  const now = new Map(after.map((r) => [r.ref, r]));
  let changed = false;
  for (const ref of new Set([...old.keys(), ...now.keys()])) {
    const a = old.get(ref);
    const b = now.get(ref);
    if (a === undefined || b === undefined || !same(a, b)) changed = true;
    const from = a?.target ?? null;
    const to = b?.target ?? null;
    if (ref === 'HEAD' || from === to || a?.diverged !== undefined || b?.diverged !== undefined) continue;
    const push = {
      did,
      rkey: `${writer.key}#${ref}`,
      rev: at.rev,
      repo,
      ref,
      old_target: from,
      new_target: to,
      time: at.time,
      seq: at.seq,
      pusher: writer.pusher,
    };
    const noted = await tx
      .insertInto('pushes')
      .values(push)
      .onConflict((oc) => oc.columns(['did', 'rkey', 'rev']).doNothing())
      .executeTakeFirst();
    // A push noted before (the same event again) has had its webhooks' deliveries queued.
    if (Number(noted.numInsertedOrUpdatedRows ?? 0) > 0)
      await queuePush(tx, { ...push, before: from, after: to });
  }
  return changed;
}

/** Only a table row the index keeps unchanged, or older than it holds, is passed over. */
function stale(old: { rev: string; cid: string | null } | undefined, change: TableChange): boolean {
  return old !== undefined && (old.rev > change.rev || (old.rev === change.rev && old.cid === change.cid));
}

/**
 * Relists the repository after its owner's table (`table`, undefined once deleted) or one of its
 * parts changed; `before` is what the index listed for it until now: `refs` its own rows (its
 * table's, or its records'), `shown` what readers were shown (a team's refs, computed by the rule).
 */
async function relist(
  tx: Db,
  did: string,
  repo: string,
  table: RefTableRow | undefined,
  before: { refs: ListedRef[]; shown: ListedRef[]; inTable: boolean },
  at: { rev: string; time: string; seq: number | null },
): Promise<TableApplied> {
  if (table === undefined) {
    // No table now: the repository is read from its ref records again, as a reader would, and
    // what moved between the two listings is a push like any other. Without a table it has no
    // maintainers.
    await tx.deleteFrom('table_refs').where('did', '=', did).where('repo', '=', repo).execute();
    await writeMaintainers(tx, did, repo, []);
    const records = await liveRefs(tx, did, repo);
    return { repo, changed: await notePushes(tx, did, repo, before.shown, records, at) };
  }
  const listing = await listingOf(tx, table);
  const problem = 'problem' in listing ? listing.problem : null;
  await tx
    .updateTable('ref_tables')
    .set({ problem })
    .where('did', '=', did)
    .where('rkey', '=', table.rkey)
    .execute();
  // A table that gives no listing leaves the last good refs: the table's last whole listing, or
  // the ref records' refs when it never gave one (copied, since the records count no more).
  const after = 'refs' in listing ? listing.refs : before.refs;
  const held = new Set((await maintainersOfRepo(tx, did, repo)).map((m) => m.did));
  // A table that gives no listing leaves the last good maintainers too. Who maintains it changes
  // the team's refs (a maintainer's values count, or stop counting): the mirror catches up.
  const team = 'refs' in listing && (await writeMaintainers(tx, did, repo, listing.maintainers));
  if (!before.inTable)
    await tx.deleteFrom('table_refs').where('did', '=', did).where('repo', '=', repo).execute();
  await writeRows(tx, did, repo, before.inTable ? before.refs : [], after);
  // Pushes are what moved in the repository's refs as readers see them (a team's by the rule), so
  // an owner's write that only catches up with a maintainer's value notes nothing.
  const shown = await liveRefs(tx, did, repo);
  const changed = (await notePushes(tx, did, repo, before.shown, shown, at)) || team;
  const memberProblems = team ? await newMemberProblems(tx, did, repo, held) : [];
  return {
    repo,
    changed,
    ...(problem === null ? {} : { problem }),
    ...(memberProblems.length === 0 ? {} : { memberProblems }),
  };
}

/** The refs the index lists for the repository now (its table's or its records'), for a diff. */
async function listed(tx: Db, did: string, repo: string, onTable: boolean): Promise<ListedRef[]> {
  if (!onTable) return liveRefs(tx, did, repo);
  return tx.selectFrom('table_refs').selectAll().where('did', '=', did).where('repo', '=', repo).execute();
}

/** Applies a `dev.knotless.refs` record change; see the module's comment. */
export async function applyTable(tx: Db, change: TableChange, source?: EventSource): Promise<TableApplied> {
  const old = await tx
    .selectFrom('ref_tables')
    .select(['rev', 'cid', 'deleted', 'value', 'problem'])
    .where('did', '=', change.did)
    .where('rkey', '=', change.rkey)
    .executeTakeFirst();
  if (stale(old, change) || (old === undefined && change.record === null)) return { changed: false };
  const repo = repoOfKey(change.rkey);
  const owner = repo === change.rkey;
  const wasLive = owner && old !== undefined && old.deleted === 0;
  const refs = owner ? await listed(tx, change.did, repo, wasLive) : [];
  const before = { refs, shown: wasLive ? await liveRefs(tx, change.did, repo) : refs, inTable: wasLive };
  // A maintainer's table is one the repository's refs are computed from, only while its owner's
  // table lists them, under the key the format gives that writer's table of it.
  const of = owner ? undefined : await ownerListing(tx, change.did, change.rkey, repo);
  const teamBefore = of === undefined ? [] : await liveRefs(tx, of, repo);
  const row: RefTableRow = {
    did: change.did,
    rkey: change.rkey,
    repo,
    owner: owner ? 1 : 0,
    cid: change.cid,
    rev: change.rev,
    deleted: change.record === null ? 1 : 0,
    value: change.record === null ? null : JSON.stringify(change.record),
    problem: null,
    indexed_at: change.time,
  };
  await tx
    .insertInto('ref_tables')
    .values(row)
    .onConflict((oc) => oc.columns(['did', 'rkey']).doUpdateSet(row))
    .execute();
  const at = { rev: change.rev, time: change.time, seq: source?.seq ?? null };
  if (!owner) {
    if (of === undefined) return { changed: false };
    // The same version of a table read again (a replay under a later revision, a recheck) was said already.
    const said = old !== undefined && old.deleted === 0 && old.cid === change.cid ? old.problem : null;
    const problem = await memberProblem(tx, of, row, said);
    // What the write moved in the team's refs, as every reader computes them, is the maintainer's push.
    const teamAfter = await liveRefs(tx, of, repo);
    await notePushes(tx, of, repo, teamBefore, teamAfter, at, { key: change.rkey, pusher: change.did });
    return {
      repo,
      owner: of,
      changed: true,
      ...(problem === undefined ? {} : { memberProblems: [problem] }),
    };
  }
  return relist(tx, change.did, repo, change.record === null ? undefined : row, before, at);
}

/**
 * The owner whose repository `repo` lists `did` as a maintainer (as indexed) and whose table of it
 * has, in `did`'s account, the key `rkey` (format.md, "Teams"); undefined when there is none: a
 * table anyone else writes under the repository's name counts for nothing.
 */
async function ownerListing(tx: Db, did: string, rkey: string, repo: string): Promise<string | undefined> {
  const owners = await tx
    .selectFrom('repo_maintainers')
    .select('did')
    .where('maintainer', '=', did)
    .where('repo', '=', repo)
    .execute();
  return owners.map((o) => o.did).find((o) => refTableKey(repo, o, did) === rkey);
}

/**
 * Why the maintainer's table `row` of `owner`'s repository gives the team nothing (it breaks a
 * rule of a maintainer's table of that repository: format.md, "Teams"), kept in `ref_tables.problem`;
 * returned only when it is not what was said of this version already (`said`), so that each bad
 * version is said once, not at every read. A sealed table (a private repository's) is no problem.
 */
async function memberProblem(
  tx: Db,
  owner: string,
  row: RefTableRow,
  said: string | null,
): Promise<{ maintainer: string; problem: string } | undefined> {
  const value = openValue(row.value);
  let problem: string | null = null;
  if (value !== undefined)
    try {
      await joinedTable(tx, row.did, value, `at://${owner}/${REPO_COLLECTION}/${row.repo}`, false);
    } catch (err) {
      if (!isKnotlessError(err, 'corrupt-remote')) throw err;
      problem = err.message;
    }
  await tx
    .updateTable('ref_tables')
    .set({ problem })
    .where('did', '=', row.did)
    .where('rkey', '=', row.rkey)
    .execute();
  return problem === null || problem === said ? undefined : { maintainer: row.did, problem };
}

/**
 * The tables of maintainers `owner`'s repository lists now and did not before (`held`), checked
 * as they start to count: a table that broke a rule before its writer became a maintainer is said
 * now, once.
 */
async function newMemberProblems(
  tx: Db,
  owner: string,
  repo: string,
  held: Set<string>,
): Promise<{ maintainer: string; problem: string }[]> {
  const out: { maintainer: string; problem: string }[] = [];
  for (const m of await maintainersOfRepo(tx, owner, repo)) {
    if (held.has(m.did)) continue;
    const row = await tx
      .selectFrom('ref_tables')
      .selectAll()
      .where('did', '=', m.did)
      .where('rkey', '=', refTableKey(repo, owner, m.did))
      .where('deleted', '=', 0)
      .executeTakeFirst();
    if (row === undefined) continue;
    const p = await memberProblem(tx, owner, row, row.problem);
    if (p !== undefined) out.push(p);
  }
  return out;
}

/** Applies a `dev.knotless.refs.part` record change; the table that lists it is joined again. */
export async function applyTablePart(
  tx: Db,
  change: TableChange,
  source?: EventSource,
): Promise<TableApplied> {
  const old = await tx
    .selectFrom('ref_table_parts')
    .select(['rev', 'cid'])
    .where('did', '=', change.did)
    .where('rkey', '=', change.rkey)
    .executeTakeFirst();
  if (stale(old, change) || (old === undefined && change.record === null)) return { changed: false };
  const row = {
    did: change.did,
    rkey: change.rkey,
    cid: change.cid,
    rev: change.rev,
    deleted: change.record === null ? 1 : 0,
    value: change.record === null ? null : JSON.stringify(change.record),
  };
  await tx
    .insertInto('ref_table_parts')
    .values(row)
    .onConflict((oc) => oc.columns(['did', 'rkey']).doUpdateSet(row))
    .execute();
  // Only the table that names this part is affected: a new part is written before the table that
  // lists it, and an old one deleted after, so most part changes leave the listing alone.
  const repo = repoOfKey(change.rkey);
  const table = await ownerTable(tx, change.did, repo);
  if (table === undefined || !namesPart(table, change.rkey)) return { changed: false };
  const refs = await listed(tx, change.did, repo, true);
  const before = { refs, shown: await liveRefs(tx, change.did, repo), inTable: true };
  const at = { rev: change.rev, time: change.time, seq: source?.seq ?? null };
  return relist(tx, change.did, repo, table, before, at);
}

/** Whether the stored table lists a part under `rkey` (read from its JSON, before any rule). */
function namesPart(table: RefTableRow, rkey: string): boolean {
  const value = JSON.parse(table.value ?? 'null') as { parts?: unknown } | null;
  return (
    Array.isArray(value?.parts) &&
    value.parts.some((p) => typeof p === 'object' && p !== null && (p as { rkey?: unknown }).rkey === rkey)
  );
}
