// The ref table (`dev.knotless.refs`, docs/reference/format.md "The ref table"): a repository's refs
// as one account holds them, in one record, so that a push is one write and one getRecord proof
// covers every ref. This module is the table itself: its key, reading and checking a record and its
// parts, applying a push's updates, and laying a table out in records (parts above 256 KiB).
// Fetching and verifying the records is the caller's.
import crypto from 'node:crypto';
import { KnotlessError } from '../errors.ts';
import { isObjectId } from '../git/refname.ts';
import { safeText } from '../text/terminal.ts';
import { REFS_COLLECTION, REFS_PART_COLLECTION } from './collections.ts';
import { MAX_RECORD_KEY } from './ref-key.ts';
import { isSafeRefName, MAX_PACKS, parsePack, writePack, type PackEntry } from './ref-rules.ts';

/** A record of the table (the table or one part) is kept at or under this many bytes of JSON. */
export const MAX_TABLE_BYTES = 256 * 1024;
/** When a table with parts holds more than this in its own entries, the next write repacks it. */
export const MAX_OVERRIDE_BYTES = 64 * 1024;
/** Most entries, packs, parts, gone names and maintainers a record may list (the lexicon's limits). */
const MAX_ENTRIES = 100_000;
const MAX_TABLE_PACKS = 100_000;
const MAX_TABLE_PARTS = 10_000;
const MAX_MAINTAINERS = 1000;
const MAX_OVER = 1000;

/** A maintainer as the owner's table lists them: their DID and since when. */
export interface Maintainer {
  did: string;
  since: string;
}

/**
 * The maintainers a table lists, each DID once (at its first listing), in the order listed; the
 * owner's own DID is not a maintainer (the owner decides as the owner). Only the owner's verified
 * table may be passed: a list in anyone else's record names nobody. Every reader of who maintains a
 * repository (the CLI's list, the team's reads and pushes, the agent, the appview's index) goes
 * through this, so that they count the same accounts.
 */
export function maintainerList(table: { maintainers: readonly Maintainer[] }, owner: string): Maintainer[] {
  const seen = new Set<string>([owner]);
  return table.maintainers.filter((m) => !seen.has(m.did) && seen.add(m.did));
}

/** {@link maintainerList}'s DIDs. */
export function maintainersOf(table: { maintainers: readonly Maintainer[] }, owner: string): string[] {
  return maintainerList(table, owner).map((m) => m.did);
}

/** One writer's replaced value: their DID and what they had (absent: no such ref). */
export interface Over {
  did: string;
  target?: string;
}

/** One ref of a table, its packs resolved (in order; each thin only against the ones before it). */
export interface TableRef {
  ref: string;
  /** Absent only for a tombstone. */
  target?: string;
  peeled?: string;
  packs: PackEntry[];
  /** A maintainer's tombstone: the writer deleted the ref (`over` says whose value it replaced). */
  deleted?: true;
  over?: Over[];
}

/** A table as readers use it: parts joined, overrides and `gone` applied, refs sorted by name. */
export interface RefTable {
  /** The at-uri of the repository's `dev.knotless.repo` record. */
  repo: string;
  head?: string;
  refs: TableRef[];
  maintainers: Maintainer[];
  seq: number;
  updatedAt: string;
}

/** A `#part` of a stored table: which part record holds a run of its refs. */
export interface PartLink {
  rkey: string;
  cid: string;
  first: string;
  last: string;
  count: number;
}

/** A `dev.knotless.refs` record as stored: refs are indices into the record's own pack table. */
export interface StoredTable extends Omit<RefTable, 'refs'> {
  refs: TableRef[];
  parts: PartLink[];
  gone: string[];
}

/** A part record read by its key, with the CID its proof (or its listing) gave for it. */
export interface FetchedPart {
  rkey: string;
  cid: string;
  value: unknown;
}

/** Orders ref names by their UTF-8 bytes, as git does (JavaScript's `<` compares UTF-16 units). */
export function compareRefNames(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function invalid(repo: string, what: string): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `The ref table of ${safeText(repo, 200)} is invalid (${what}); the remote cannot be read until it is rewritten.`,
  );
}

/**
 * The table's record key: `repo` for the owner's own table; for a maintainer's table of another
 * account's repository `repo~<owner DID>` (a DID made only of record-key characters, as every
 * `did:plc` is, stands for itself), else `repo~~<32 hex digits of sha-256(owner DID)>`: a `did:web`
 * with an escaped port, or a key longer than 512 characters.
 */
export function refTableKey(repo: string, owner: string, writer: string): string {
  if (owner === writer) return repo;
  const key = `${repo}~${owner}`;
  if (/^[A-Za-z0-9._:-]+$/.test(owner) && key.length <= MAX_RECORD_KEY) return key;
  return `${repo}~~${crypto.createHash('sha256').update(owner, 'utf8').digest('hex').slice(0, 32)}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isDid(v: unknown): v is string {
  return typeof v === 'string' && /^did:[a-z]+:[A-Za-z0-9._:%-]{1,2000}$/.test(v);
}

function list(v: unknown, max: number, what: string, fail: (w: string) => Error): unknown[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw fail(`${what} is not a list`);
  if (v.length > max) throw fail(`${what} holds more than ${max} items`);
  return v;
}

/** Reads the `refs` of a table or a part against its own pack table; checks names, ids, order. */
function parseEntries(
  value: Record<string, unknown>,
  fail: (w: string) => Error,
  tombstones: boolean,
): TableRef[] {
  const packs = list(value['packs'], MAX_TABLE_PACKS, 'the pack table', fail).map((p) => parsePack(p, fail));
  const ids = new Set<string>();
  for (const p of packs) {
    if (ids.has(p.id)) throw fail(`pack ${p.id} is listed twice`);
    ids.add(p.id);
  }
  if (!Array.isArray(value['refs'])) throw fail('its refs are not a list');
  const entries = list(value['refs'], MAX_ENTRIES, 'its refs', fail);
  const out: TableRef[] = [];
  for (const e of entries) {
    if (!isObject(e) || !isSafeRefName(e['ref'])) throw fail('an entry names no valid ref');
    const ref = e['ref'];
    const name = `"${safeText(ref, 100)}"`;
    const prev = out.at(-1);
    if (prev !== undefined && compareRefNames(prev.ref, ref) >= 0)
      throw fail(
        compareRefNames(prev.ref, ref) === 0
          ? `${name} is listed twice`
          : `its refs are not sorted at ${name}`,
      );
    const entry: TableRef = { ref, packs: [] };
    if (e['over'] !== undefined) {
      entry.over = list(e['over'], MAX_OVER, `${name}'s over`, fail).map((o) => {
        if (!isObject(o) || !isDid(o['did'])) throw fail(`${name} replaced a value of no valid writer`);
        if (o['target'] !== undefined && !isObjectId(o['target']))
          throw fail(`${name} replaced an invalid value`);
        return o['target'] === undefined ? { did: o['did'] } : { did: o['did'], target: o['target'] };
      });
    }
    if (e['deleted'] !== undefined) {
      if (e['deleted'] !== true) throw fail(`${name} has a deleted flag that is not true`);
      if (!tombstones)
        throw fail(
          `${name} is a tombstone, which only a maintainer's table (or an owner's naming maintainers) may hold`,
        );
      if (entry.over === undefined) throw fail(`${name} is a tombstone that replaced nothing`);
      if (e['target'] !== undefined || e['packs'] !== undefined)
        throw fail(`${name} is a tombstone with a value`);
      entry.deleted = true;
      out.push(entry);
      continue;
    }
    if (!isObjectId(e['target'])) throw fail(`${name} has no valid target`);
    entry.target = e['target'];
    if (e['peeled'] !== undefined) {
      if (!isObjectId(e['peeled'])) throw fail(`${name} has an invalid peeled id`);
      entry.peeled = e['peeled'];
    }
    const indices = list(e['packs'], MAX_PACKS, `${name}'s packs`, fail);
    const seen = new Set<number>();
    for (const i of indices) {
      if (!Number.isSafeInteger(i) || (i as number) < 0 || (i as number) >= packs.length)
        throw fail(`${name} lists a pack the table does not have`);
      if (seen.has(i as number)) throw fail(`${name} lists one pack twice`);
      seen.add(i as number);
      entry.packs.push(packs[i as number]!);
    }
    out.push(entry);
  }
  return out;
}

/**
 * Reads a `dev.knotless.refs` record: every field the lexicon defines has its type, ref names and
 * ids follow the rules of ref records, entries are sorted and each name once, every pack index is
 * in the pack table, `repo` is exactly the repository the caller read it for (`repoUri`), and only
 * the owner's table (`owner`) has a `head` and `maintainers`, while tombstones are in a maintainer's, or in
 * an owner's that names maintainers (a value the owner deleted over theirs, or a removal kept).
 * Anything else refuses the whole table: it is one signed unit, and a part of it is no listing.
 */
export function parseRefTable(value: unknown, repoUri: string, owner: boolean): StoredTable {
  const fail = (what: string): Error => invalid(repoUri, what);
  if (!isObject(value)) throw fail('it is not an object');
  if (value['repo'] !== repoUri) throw fail('it names another repository');
  const seq = value['seq'];
  if (!Number.isSafeInteger(seq) || (seq as number) < 0) throw fail('its seq is not a count');
  if (typeof value['updatedAt'] !== 'string') throw fail('it has no updatedAt time');
  const named = Array.isArray(value['maintainers']) && value['maintainers'].length > 0;
  const refs = parseEntries(value, fail, !owner || named);
  const table: StoredTable = {
    repo: repoUri,
    refs,
    parts: [],
    gone: [],
    maintainers: [],
    seq: seq as number,
    updatedAt: value['updatedAt'],
  };
  if (value['head'] !== undefined) {
    if (!owner) throw fail("it names a default branch, which only the owner's table may");
    if (!isSafeRefName(value['head'])) throw fail('its default branch is not a valid ref name');
    table.head = value['head'];
  }
  table.maintainers = list(value['maintainers'], MAX_MAINTAINERS, 'its maintainers', fail).map((m) => {
    if (!owner) throw fail("it names maintainers, which only the owner's table may");
    if (!isObject(m) || !isDid(m['did']) || typeof m['since'] !== 'string')
      throw fail('a maintainer has no valid DID or time');
    return { did: m['did'], since: m['since'] };
  });
  table.parts = list(value['parts'], MAX_TABLE_PARTS, 'its parts', fail).map((p) => {
    if (
      !isObject(p) ||
      typeof p['rkey'] !== 'string' ||
      typeof p['cid'] !== 'string' ||
      !isSafeRefName(p['first']) ||
      !isSafeRefName(p['last']) ||
      !Number.isSafeInteger(p['count']) ||
      (p['count'] as number) < 1
    )
      throw fail('a part lacks its key, CID, range or count');
    return {
      rkey: p['rkey'],
      cid: p['cid'],
      first: p['first'],
      last: p['last'],
      count: p['count'] as number,
    };
  });
  for (let i = 0; i < table.parts.length; i++) {
    const p = table.parts[i]!;
    const prev = table.parts[i - 1];
    if (
      compareRefNames(p.first, p.last) > 0 ||
      (prev !== undefined && compareRefNames(prev.last, p.first) >= 0)
    )
      throw fail('its parts overlap or are out of order');
  }
  table.gone = list(value['gone'], MAX_ENTRIES, 'its gone refs', fail).map((g) => {
    if (!isSafeRefName(g)) throw fail('a gone ref is not a valid ref name');
    return g;
  });
  if (table.gone.length > 0 && table.parts.length === 0) throw fail('it has gone refs but no parts');
  return table;
}

/**
 * Joins a stored table with its parts into the table readers use. Each part must be the one the
 * table names: the same key, the CID the table holds for it (so a part whose contents changed is
 * refused, whatever it says), the same repository, its refs sorted, within its range and as many
 * as the table says. The table's own entries override the parts', and `gone` deletes refs from them.
 */
export function joinRefTable(table: StoredTable, fetched: FetchedPart[]): RefTable {
  const fail = (what: string): Error => invalid(table.repo, what);
  const byKey = new Map(fetched.map((p) => [p.rkey, p]));
  const own = new Map(table.refs.map((r) => [r.ref, r]));
  const gone = new Set(table.gone);
  const merged = new Map<string, TableRef>();
  for (const link of table.parts) {
    const part = byKey.get(link.rkey);
    if (part === undefined) throw fail(`part ${safeText(link.rkey, 100)} is missing`);
    if (part.cid !== link.cid)
      throw fail(`part ${safeText(link.rkey, 100)} is not the one the table names (its CID differs)`);
    if (!isObject(part.value) || part.value['repo'] !== table.repo)
      throw fail(`part ${safeText(link.rkey, 100)} belongs to another repository`);
    const refs = parseEntries(part.value, fail, true);
    if (refs.length !== link.count)
      throw fail(`part ${safeText(link.rkey, 100)} holds another number of refs`);
    if (refs[0]?.ref !== link.first || refs.at(-1)?.ref !== link.last)
      throw fail(`part ${safeText(link.rkey, 100)} holds refs outside its range`);
    for (const r of refs) if (!gone.has(r.ref) && !own.has(r.ref)) merged.set(r.ref, r);
  }
  for (const r of table.refs) merged.set(r.ref, r);
  const { parts: _parts, gone: _gone, ...rest } = table;
  return { ...rest, refs: [...merged.values()].sort((a, b) => compareRefNames(a.ref, b.ref)) };
}

/** One ref a push changes: a new value and its packs, or a deletion (`target` absent). */
export interface RefUpdate {
  ref: string;
  target?: string;
  peeled?: string;
  packs?: PackEntry[];
  /** The values of other writers this one replaced (maintainers' and owners' tables of teams). */
  over?: Over[];
}

/**
 * Applies a push's updates to a table (none yet: the first push creates it): the new table has
 * seq one more (0 when created), the refs sorted and each once. A deletion removes the ref, or,
 * in a maintainer's table (or an owner's naming maintainers: `tombstones`) when it replaced another
 * writer's value (`over`), leaves a tombstone.
 */
export function applyRefUpdates(
  table: RefTable | undefined,
  updates: RefUpdate[],
  init: { repo: string; head?: string; maintainer: boolean; tombstones?: boolean },
  now: Date,
): RefTable {
  const refs = new Map((table?.refs ?? []).map((r) => [r.ref, r]));
  const seen = new Set<string>();
  for (const u of updates) {
    const name: string = u.ref;
    if (!isSafeRefName(name))
      throw new Error(`cannot write an invalid ref name into a ref table: ${safeText(name, 100)}`);
    if (seen.has(u.ref)) throw new Error(`a push updates ${u.ref} twice`);
    seen.add(u.ref);
    if (u.target === undefined) {
      if ((init.maintainer || init.tombstones === true) && u.over !== undefined && u.over.length > 0)
        refs.set(u.ref, { ref: u.ref, packs: [], deleted: true, over: u.over });
      else refs.delete(u.ref);
      continue;
    }
    const entry: TableRef = { ref: u.ref, target: u.target, packs: u.packs ?? [] };
    if (u.peeled !== undefined) entry.peeled = u.peeled;
    if (u.over !== undefined && u.over.length > 0) entry.over = u.over;
    refs.set(u.ref, entry);
  }
  const next: RefTable = {
    repo: table?.repo ?? init.repo,
    refs: [...refs.values()].sort((a, b) => compareRefNames(a.ref, b.ref)),
    maintainers: table?.maintainers ?? [],
    seq: table === undefined ? 0 : table.seq + 1,
    updatedAt: now.toISOString(),
  };
  const head = table?.head ?? init.head;
  if (head !== undefined && !init.maintainer) next.head = head;
  return next;
}

/** Writes entries against a new pack table: each pack once, in the order entries first list them. */
function writeEntries(refs: TableRef[]): {
  packs: Record<string, unknown>[];
  refs: Record<string, unknown>[];
} {
  const index = new Map<string, number>();
  const packs: Record<string, unknown>[] = [];
  const out = refs.map((r) => {
    const e: Record<string, unknown> = { ref: r.ref };
    if (r.deleted === true) e['deleted'] = true;
    else {
      e['target'] = r.target;
      if (r.peeled !== undefined) e['peeled'] = r.peeled;
      e['packs'] = r.packs.map((p) => {
        let i = index.get(p.id);
        if (i === undefined) {
          i = packs.length;
          index.set(p.id, i);
          packs.push(writePack(p));
        }
        return i;
      });
    }
    if (r.over !== undefined) e['over'] = r.over.map((o) => ({ ...o }));
    return e;
  });
  return { packs, refs: out };
}

function jsonBytes(v: unknown): number {
  return Buffer.byteLength(JSON.stringify(v), 'utf8');
}

/** Whether two entries say the same: value, packs (by id, in order), tombstone and `over`. */
function sameEntry(a: TableRef, b: TableRef): boolean {
  return (
    JSON.stringify(writeEntries([a]).refs) === JSON.stringify(writeEntries([b]).refs) &&
    a.packs.map((p) => p.id).join() === b.packs.map((p) => p.id).join()
  );
}

/** Records to write for a table: the table, new parts to create first, and parts no longer listed. */
export interface TableWrites {
  table: Record<string, unknown>;
  /** Parts to create before (or in the same commit as) the table; never changed once written. */
  create: { rkey: string; value: Record<string, unknown> }[];
  /** Keys of the previous table's parts it no longer lists, to delete after the table is written. */
  remove: string[];
}

function tableRecord(t: RefTable, written: ReturnType<typeof writeEntries>, extra: Record<string, unknown>) {
  return {
    $type: REFS_COLLECTION,
    repo: t.repo,
    ...(t.head === undefined ? {} : { head: t.head }),
    packs: written.packs,
    refs: written.refs,
    ...extra,
    ...(t.maintainers.length === 0 ? {} : { maintainers: t.maintainers }),
    seq: t.seq,
    updatedAt: t.updatedAt,
  };
}

/** The CID of a record whose DAG-CBOR block the caller computes is not known here: parts name theirs. */
export type PartCid = (value: Record<string, unknown>, rkey: string) => Promise<string>;

/**
 * Lays a table out in records. A table that fits in 256 KiB is one record. A table that had parts
 * (`previous`, as stored, with its parts' refs joined in `previousRefs`) keeps them and holds its
 * changes as overrides and `gone` while those stay under 64 KiB; past that, or when it no longer
 * fits, it is repacked: its refs go, sorted, into parts of at most 256 KiB each, keyed by the
 * sha-256 of their JSON (so an unchanged run keeps its key and is not written again), or `digest`
 * of it (a private repository's keyed one). `cidOf` gives a new part's record CID (its DAG-CBOR
 * block's, as written: sealed, for a private repository), which the table records; a part kept
 * keeps the CID the previous table names, as it is not written again.
 */
export async function layoutRefTable(
  t: RefTable,
  key: string,
  cidOf: PartCid,
  previous?: { table: StoredTable; joined: RefTable },
  digest: (json: string) => string = (json) =>
    crypto.createHash('sha256').update(json).digest('hex').slice(0, 32),
): Promise<TableWrites> {
  const oldParts = previous?.table.parts ?? [];
  if (previous !== undefined && oldParts.length > 0) {
    const inParts = new Map<string, TableRef>();
    const ownBefore = new Set(previous.table.refs.map((r) => r.ref));
    // The parts' entries are the joined view minus the old overrides; refs the old table overrode
    // or gone are compared against nothing, which only ever keeps an override that was needed.
    for (const r of previous.joined.refs) if (!ownBefore.has(r.ref)) inParts.set(r.ref, r);
    const now = new Map(t.refs.map((r) => [r.ref, r]));
    const overrides = t.refs.filter((r) => {
      const old = inParts.get(r.ref);
      return old === undefined || !sameEntry(old, r);
    });
    const inRange = (name: string) =>
      oldParts.some((p) => compareRefNames(p.first, name) <= 0 && compareRefNames(name, p.last) <= 0);
    const gone = [...new Set([...previous.table.gone, ...inParts.keys()])]
      .filter((n) => !now.has(n) && inRange(n))
      .sort(compareRefNames);
    const written = writeEntries(overrides);
    const record = tableRecord(t, written, { parts: oldParts, ...(gone.length === 0 ? {} : { gone }) });
    if (jsonBytes(written) + jsonBytes(gone) <= MAX_OVERRIDE_BYTES && jsonBytes(record) <= MAX_TABLE_BYTES)
      return { table: record, create: [], remove: [] };
  }
  const whole = tableRecord(t, writeEntries(t.refs), {});
  if (jsonBytes(whole) <= MAX_TABLE_BYTES)
    return { table: whole, create: [], remove: oldParts.map((p) => p.rkey) };

  const runs: TableRef[][] = [];
  let run: TableRef[] = [];
  for (const r of t.refs) {
    if (jsonBytes(writeEntries([r])) + 512 > MAX_TABLE_BYTES)
      throw new KnotlessError(
        'too-large',
        `The ref ${safeText(r.ref, 100)} lists too many packs for a ref table; compact it and push again.`,
      );
    if (run.length > 0 && jsonBytes(partValue(t.repo, [...run, r])) > MAX_TABLE_BYTES) {
      runs.push(run);
      run = [];
    }
    run.push(r);
  }
  if (run.length > 0) runs.push(run);
  const links: PartLink[] = [];
  const create: TableWrites['create'] = [];
  const kept = new Map(oldParts.map((p) => [p.rkey, p.cid]));
  for (const refs of runs) {
    const value = partValue(t.repo, refs);
    const rkey = `${key}~${digest(JSON.stringify(value))}`;
    links.push({
      rkey,
      cid: kept.get(rkey) ?? (await cidOf(value, rkey)),
      first: refs[0]!.ref,
      last: refs.at(-1)!.ref,
      count: refs.length,
    });
    if (!kept.has(rkey)) create.push({ rkey, value });
  }
  const listed = new Set(links.map((l) => l.rkey));
  const table = tableRecord(t, { packs: [], refs: [] }, { parts: links });
  return { table, create, remove: oldParts.map((p) => p.rkey).filter((k) => !listed.has(k)) };
}

function partValue(repo: string, refs: TableRef[]): Record<string, unknown> {
  return { $type: REFS_PART_COLLECTION, repo, ...writeEntries(refs) };
}

/** Whether a ref has the same entry in two tables (both absent counts as the same). */
export function sameTableEntry(a: TableRef | undefined, b: TableRef | undefined): boolean {
  return a === undefined || b === undefined ? a === b : sameEntry(a, b);
}

/**
 * What a write of `next` over `base` changes, as a push's updates: each ref whose entry differs
 * (value, packs, `over`), or that is gone. Undefined when it changes anything but refs (the default
 * branch, the maintainers, the repository): such a write is not a push's, and is not folded.
 */
export function tableUpdates(base: RefTable, next: RefTable): RefUpdate[] | undefined {
  if (next.repo !== base.repo || next.head !== base.head) return undefined;
  if (JSON.stringify(next.maintainers) !== JSON.stringify(base.maintainers)) return undefined;
  const before = new Map(base.refs.map((r) => [r.ref, r]));
  const after = new Map(next.refs.map((r) => [r.ref, r]));
  const out: RefUpdate[] = [];
  for (const name of [...new Set([...before.keys(), ...after.keys()])].sort(compareRefNames)) {
    const now = after.get(name);
    if (sameTableEntry(before.get(name), now)) continue;
    if (now === undefined) out.push({ ref: name });
    else if (now.deleted === true) return undefined;
    else
      out.push({
        ref: name,
        target: now.target!,
        packs: now.packs,
        ...(now.peeled === undefined ? {} : { peeled: now.peeled }),
        ...(now.over === undefined ? {} : { over: now.over }),
      });
  }
  return out;
}
