import { parseRefRecord, writeRefRecord } from '../remote/ref-record.ts';
import type { RemoteRef } from '../remote/remote-repo.ts';

/** The agent's view of one repository's refs. */
interface RepoView {
  /** True once a listing finished after the event stream was following the account. */
  confirmed: boolean;
  refs: Map<string, RemoteRef>;
  /** Revisions of deletions, so a late event cannot bring a deleted ref back. */
  deleted: Map<string, string>;
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
 * Every repository view the agent keeps, fed by listings, by the helpers' own writes and by the
 * account's event stream. A change is applied only when its revision is newer than what the view
 * has for that key, so late events never undo newer writes.
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

  /** Replaces a view with a fresh listing. */
  load(did: string, repo: string, refs: RemoteRef[], confirmed: boolean): void {
    this.#views.set(Views.key(did, repo), {
      confirmed,
      refs: new Map(refs.map((r) => [r.key, r])),
      deleted: new Map(),
    });
  }

  /** Marks a view as needing a new listing (e.g. a helper met a compare-and-swap conflict). */
  invalidate(did: string, repo: string): void {
    const v = this.get(did, repo);
    if (v !== undefined) v.confirmed = false;
  }

  /** Applies one change (null: the record was deleted) if it is newer than what the view holds. */
  apply(did: string, repo: string, key: string, change: RemoteRef | null, rev: string): void {
    const v = this.get(did, repo);
    if (v === undefined) return;
    const heldRev = v.refs.get(key)?.rev ?? v.deleted.get(key);
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
