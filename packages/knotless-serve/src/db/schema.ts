/** Where ingestion stopped on one event stream: the last sequence number fully indexed. */
export interface CursorTable {
  service: string;
  seq: number | string;
}

/** An account that owns (or owned) knotless repositories. */
export interface OwnerTable {
  did: string;
  /** The verified handle; null when the DID document's handle does not resolve back. */
  handle: string | null;
  pds: string | null;
  resolved_at: string;
}

/** A `dev.knotless.repo` record. Deleted records stay as tombstones so that a replayed create loses. */
export interface RepoTable {
  did: string;
  name: string;
  description: string | null;
  created_at: string | null;
  /** The account revision that last wrote this row: older events never overwrite newer ones. */
  rev: string;
  deleted: number;
  indexed_at: string;
}

/** A `dev.knotless.ref` record (or its tombstone), keyed by record key as delete events carry only that. */
export interface RefTable {
  did: string;
  rkey: string;
  repo: string;
  ref: string;
  target: string | null;
  symref: string | null;
  peeled: string | null;
  /** The record's pack list as JSON (inline packs as base64), what the mirror indexes. */
  packs: string;
  cid: string | null;
  rev: string;
  deleted: number;
  updated_at: string;
}

/** One change of one ref, as seen on the event stream (or found by a backfill). */
export interface PushTable {
  did: string;
  rkey: string;
  rev: string;
  repo: string;
  ref: string;
  old_target: string | null;
  new_target: string | null;
  time: string;
  seq: number | string | null;
}

/** The whole index. */
export interface Database {
  cursors: CursorTable;
  owners: OwnerTable;
  repos: RepoTable;
  refs: RefTable;
  pushes: PushTable;
}
