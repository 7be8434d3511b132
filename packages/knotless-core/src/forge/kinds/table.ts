// The table of the forge's kinds of record: what the reader (read.ts), the front ends' lexicon checks
// (FORGE_LEXICONS), the OAuth scope (forge/oauth-scope.ts), the appview's ingest (which collections it
// follows and backfills, in this order) and its store (which table, which row) go through. A new kind
// is a module beside this one and a line here.
import { CHECK_KIND } from './check.ts';
import { COMMENT_KIND } from './comment.ts';
import { ISSUE_STATE_KIND } from './issue-state.ts';
import { ISSUE_KIND } from './issue.ts';
import { storedTime, type ForgeKind, type LexiconDocument } from './kind.ts';
import { PROTECTION_KIND } from './protection.ts';
import { PULL_STATUS_KIND } from './pull-status.ts';
import { PULL_KIND } from './pull.ts';
import { STAR_KIND } from './star.ts';

/** The forge's kinds, in the order a backfill reads them. */
export const FORGE_KINDS = [
  PULL_KIND,
  PULL_STATUS_KIND,
  ISSUE_KIND,
  ISSUE_STATE_KIND,
  COMMENT_KIND,
  STAR_KIND,
  CHECK_KIND,
  PROTECTION_KIND,
] as const;

type AnyKind = (typeof FORGE_KINDS)[number];
/** The record a kind reads. */
export type RecordOf<K> = K extends ForgeKind<string, string, string, infer R> ? R : never;

/** The forge's collections (what the appview indexes), in the order a backfill reads them. */
export const FORGE_COLLECTIONS = FORGE_KINDS.map((k) => k.collection);
export type ForgeCollection = AnyKind['collection'];
/** The appview's forge tables, one a collection. */
export type ForgeTable = AnyKind['table'];

/** The lexicon document of each kind: what each front end's lexicon check is built from. */
export const FORGE_LEXICONS: readonly LexiconDocument[] = FORGE_KINDS.map((k) => k.lexicon);

/** The forge's collections a knotless OAuth sign-in asks to write, in the table's order. */
export const SIGN_IN_COLLECTIONS: readonly ForgeCollection[] = FORGE_KINDS.filter((k) => k.signIn).map(
  (k) => k.collection,
);

export function isForgeCollection(c: string): c is ForgeCollection {
  return (FORGE_COLLECTIONS as readonly string[]).includes(c);
}

/** A forge record as read, with its collection. */
export type ForgeRecord = {
  [K in AnyKind as K['collection']]: { collection: K['collection']; record: RecordOf<K> };
}[ForgeCollection];

const BY_COLLECTION = new Map<string, AnyKind>(FORGE_KINDS.map((k) => [k.collection, k]));

/** The kind of a forge collection. */
export function kindOf(collection: ForgeCollection): AnyKind {
  return BY_COLLECTION.get(collection)!;
}

/** What a change to a forge record is, for its row: who, which record, which version, when. */
export interface RowSource {
  did: string;
  rkey: string;
  cid: string | null;
  rev: string;
  /** When the index took it in. */
  time: string;
}

/** A record's row in the appview's index: the columns every forge row has, then its kind's. */
export function forgeRow(change: RowSource, r: ForgeRecord): Record<string, unknown> {
  const kind = kindOf(r.collection) as ForgeKind<string, string, string, unknown>;
  return {
    did: change.did,
    rkey: change.rkey,
    cid: change.cid,
    rev: change.rev,
    deleted: 0,
    created_at: storedTime(r.record.createdAt),
    indexed_at: change.time,
    ...kind.row(r.record),
  };
}
export { storedTime, uriOf } from './kind.ts';
