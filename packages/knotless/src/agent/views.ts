import { parseRefRecord, writeRefRecord } from 'knotless-core/records/ref-record';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import { refKeyPrefix } from 'knotless-core/records/collections';
import type { FetchedPart } from 'knotless-core/records/ref-table';

/** The agent's view of one repository's refs. */
export interface RepoView {
  did: string;
  repo: string;
  /** The PDS whose event stream keeps this view current. */
  pds: string;
  /** False while the listing that starts the view is under way. */
  ready: boolean;
  refs: Map<string, RemoteRef>;
  /** Revisions of deletions, so a late event cannot bring a deleted ref back. */
  deleted: Map<string, string>;
  /** Changes the stream delivered while the listing was under way; applied over it, in order. */
  pending: Array<{ key: string; change: RemoteRef | null; rev: string }>;
  /** The account's revision read just before the listing: the listing holds at least that. */
  baseRev: string;
  /**
   * The repository's ref table, when its refs are in one (its ref records are then ignored, as every
   * reader ignores them): the table as last read or delivered, which a push swaps on.
   */
  table?: WireTable;
  /** The last change of the table the stream delivered while the view was loading (value null: deleted). */
  pendingTable?: TableChange;
  /**
   * A team's view (the owner's table names maintainers): each maintainer's own table of the
   * repository, in their own account, kept from their PDS's checked event stream. Empty otherwise.
   */
  members: Map<string, MemberView>;
}

/** One maintainer's table of a team repository, as the agent's view of the repository holds it. */
export interface MemberView {
  did: string;
  /** The PDS whose event stream keeps it current. */
  pds: string;
  /** False until the table is read after that stream went live. */
  ready: boolean;
  /** Their table; null when they hold none (they have not pushed to the repository). */
  table: WireTable | null;
  /** The revision of their account the table was read or delivered at. */
  rev: string;
  /** The last change the stream delivered while the table was being read. */
  pending?: TableChange;
}

/** A maintainer's table as the agent sends it: their DID and PDS, and their table (null: none). */
export interface WireMember {
  did: string;
  pds: string;
  table: WireTable | null;
}

/** The members of a team's view from the socket, their fields' types checked. */
export function parseWireMembers(v: unknown): WireMember[] {
  if (!Array.isArray(v))
    throw new Error('the warm agent answered /view with maintainers it does not describe');
  return v.map((m: unknown) => {
    const o = (typeof m === 'object' && m !== null ? m : {}) as Record<string, unknown>;
    if (typeof o['did'] !== 'string' || typeof o['pds'] !== 'string')
      throw new Error('the warm agent answered /view with maintainers it does not describe');
    return { did: o['did'], pds: o['pds'], table: o['table'] === null ? null : parseWireTable(o['table']) };
  });
}

/** A change of a ref table record: its new value (null: deleted), CID, revision and commit. */
export interface TableChange {
  cid: string;
  value: unknown;
  rev: string;
  commit: string;
}

/**
 * A view of a ref table as the agent sends it: the table record in its JSON form with its CID, the
 * revision and commit it was read or delivered at, and its parts' records. The helper parses and
 * joins them as a cold read does (records/read-refs.ts parseTableRead).
 */
export interface WireTable {
  cid: string;
  rev: string;
  commit: string;
  value: unknown;
  parts: FetchedPart[];
}

/** A table view from the socket, its fields' types checked (the records are parsed by the helper). */
export function parseWireTable(v: unknown): WireTable {
  const t = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
  const parts = Array.isArray(t['parts']) ? (t['parts'] as Array<Record<string, unknown>>) : undefined;
  if (
    typeof t['cid'] !== 'string' ||
    typeof t['rev'] !== 'string' ||
    typeof t['commit'] !== 'string' ||
    parts === undefined ||
    !parts.every((p) => typeof p['rkey'] === 'string' && typeof p['cid'] === 'string')
  )
    throw new Error('the warm agent answered /view with a table it does not describe');
  return {
    cid: t['cid'],
    rev: t['rev'],
    commit: t['commit'],
    value: t['value'],
    parts: parts.map((p) => ({ rkey: p['rkey'] as string, cid: p['cid'] as string, value: p['value'] })),
  };
}

/** A ref as the agent sends it over its socket (records in their JSON form). */
export interface WireRef {
  key: string;
  cid: string;
  rev?: string;
  record: unknown;
}

/** Encodes refs for the socket. */
export function writeWireRefs(refs: RemoteRef[]): WireRef[] {
  return refs.map((r) => ({
    key: r.key,
    cid: r.cid,
    ...(r.rev === undefined ? {} : { rev: r.rev }),
    record: writeRefRecord(r.record),
  }));
}

/** Decodes refs from the socket. */
export function parseWireRefs(refs: WireRef[]): RemoteRef[] {
  return refs.map((r) => ({
    key: r.key,
    cid: r.cid,
    ...(r.rev === undefined ? {} : { rev: r.rev }),
    record: parseRefRecord(r.record),
  }));
}

/**
 * Every repository view the agent keeps. A view is exact or absent: it starts from a listing made
 * while the account's event stream was live, takes every change the stream delivers after that (and
 * the helpers' own writes), and is dropped whenever a change cannot be applied. A change is applied
 * only when its revision is newer than what the view has for that key, so late copies never undo
 * newer writes.
 */
export class Views {
  readonly #views = new Map<string, RepoView>();

  static key(did: string, repo: string): string {
    return `${did}/${repo}`;
  }

  /** The view, if any. */
  get(did: string, repo: string): RepoView | undefined {
    return this.#views.get(Views.key(did, repo));
  }

  /** True when some view of this account exists, or holds its table as a maintainer's (its events are worth decoding). */
  follows(did: string): boolean {
    for (const v of this.#views.values()) if (v.did === did || v.members.has(did)) return true;
    return false;
  }

  /** Every account some view is of, or holds a maintainer's table of. */
  dids(): Set<string> {
    return new Set([...this.#views.values()].flatMap((v) => [v.did, ...v.members.keys()]));
  }

  /** Every view (ready or loading) that holds the table of maintainer `did`. */
  memberOf(did: string): RepoView[] {
    return [...this.#views.values()].filter((v) => v.members.has(did));
  }

  /** Starts a view whose listing is about to be made; changes delivered meanwhile wait in it. */
  begin(did: string, repo: string, pds: string): RepoView {
    const v: RepoView = {
      did,
      repo,
      pds,
      ready: false,
      refs: new Map(),
      deleted: new Map(),
      pending: [],
      baseRev: '',
      members: new Map(),
    };
    this.#views.set(Views.key(did, repo), v);
    return v;
  }

  /**
   * Completes a view begun with {@link begin} from its listing, then applies the changes delivered
   * meanwhile in stream order: each key ends at its last change after the stream went live, or at the
   * listed value when nothing changed it since. Does nothing when the view was dropped meanwhile.
   */
  finish(view: RepoView, refs: RemoteRef[], baseRev: string): void {
    if (this.#views.get(Views.key(view.did, view.repo)) !== view) return;
    view.refs = new Map(refs.map((r) => [r.key, r]));
    view.baseRev = baseRev;
    view.ready = true;
    for (const p of view.pending.splice(0)) this.#applyTo(view, p.key, p.change, p.rev);
  }

  /**
   * Forgets the views of one account (or of every account on `pds`), and every view that holds a
   * maintainer's table of it (or on it): a team's view is only as good as each of its tables.
   * Returns those dropped.
   */
  drop(match: { did: string } | { pds: string }): RepoView[] {
    const gone: RepoView[] = [];
    const members = (v: RepoView) => [...v.members.values()];
    for (const [k, v] of this.#views) {
      if (
        'did' in match
          ? v.did === match.did || v.members.has(match.did)
          : v.pds === match.pds || members(v).some((m) => m.pds === match.pds)
      ) {
        this.#views.delete(k);
        gone.push(v);
      }
    }
    return gone;
  }

  /** Forgets one repository's view. */
  dropRepo(did: string, repo: string): RepoView | undefined {
    const v = this.get(did, repo);
    this.#views.delete(Views.key(did, repo));
    return v;
  }

  /**
   * Completes a view begun with {@link begin} from a read of its ref table: changes of ref records
   * delivered meanwhile are dropped (readers ignore them once a table exists). Does nothing when the
   * view was dropped meanwhile; returns the table change delivered meanwhile, if any.
   */
  finishTable(view: RepoView, table: WireTable): TableChange | undefined {
    if (this.#views.get(Views.key(view.did, view.repo)) !== view) return undefined;
    view.table = table;
    view.baseRev = table.rev;
    view.pending = [];
    view.ready = true;
    const change = view.pendingTable;
    delete view.pendingTable;
    return change;
  }

  /** Every view of `did` (ready or loading). */
  of(did: string): RepoView[] {
    return [...this.#views.values()].filter((v) => v.did === did);
  }

  /** Applies one change of an account's ref records (null: deleted) to the view it belongs to. */
  apply(did: string, key: string, change: RemoteRef | null, rev: string): void {
    for (const v of this.#views.values()) {
      if (v.did !== did || !key.startsWith(refKeyPrefix(v.repo))) continue;
      // A repository on a ref table: its ref records are ignored, as every reader ignores them.
      if (v.table !== undefined) continue;
      if (v.ready) this.#applyTo(v, key, change, rev);
      else v.pending.push({ key, change, rev });
    }
  }

  #applyTo(v: RepoView, key: string, change: RemoteRef | null, rev: string): void {
    // A ref as listed has no revision of its own, but the listing holds the account at least at
    // `baseRev`: a change of that revision or older is in it already, and applied late (the stream
    // delivering an older commit after the listing) it would undo a newer write.
    const heldRev = v.refs.get(key)?.rev ?? v.deleted.get(key) ?? (v.baseRev === '' ? undefined : v.baseRev);
    if (heldRev !== undefined && rev !== '' && heldRev >= rev) return;
    if (change === null) {
      v.refs.delete(key);
      v.deleted.set(key, rev);
    } else {
      v.refs.set(key, { ...change, rev });
      v.deleted.delete(key);
    }
  }
}
