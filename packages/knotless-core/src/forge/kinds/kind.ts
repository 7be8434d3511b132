// What the forge knows of one kind of record, in one place: its collection, its lexicon document,
// whether a knotless OAuth sign-in may write it, its table in the appview's index, what a sentence
// calls it, how a record that passed its lexicon is read (the rules beyond the lexicon), and the
// columns its row holds. The table of kinds (kinds/table.ts) is what the reader (read.ts), both front
// ends' lexicon checks, the OAuth scope, the appview's ingest and its store go through, so a new kind
// is one module here and one line there, besides its lexicon, its table's migration and its pages.
import { REPO_COLLECTION } from '../../records/collections.ts';
import { isValidRepoName } from '../../records/name.ts';
import { InvalidRecord, parseAtUri, type AtUri } from '../records.ts';

/**
 * A lexicon document as its JSON file in lexicons/ holds it. Each kind's module imports its own, so
 * that the bundles carry it (an installed program has no lexicons/) and the front ends' lexicon
 * checks (@atproto/lexicon's, which knotless-core does not load) are built from the table of kinds.
 */
export interface LexiconDocument {
  lexicon: number;
  id: string;
  defs: Record<string, unknown>;
}

export interface ForgeKind<Name extends string, Collection extends string, Table extends string, R> {
  /** The reader's name for it (`forgeReader(...).star`). */
  name: Name;
  /** Its collection's NSID. */
  collection: Collection;
  /** Its lexicon document (its `id` is the collection), which a record is checked against first. */
  lexicon: LexiconDocument;
  /**
   * Whether a knotless OAuth sign-in (the CLI's `knotless login`, the appview's) asks to write it:
   * its collection is then in `KNOTLESS_OAUTH_SCOPE`. A kind left out (today a runner's checks and an
   * owner's protections) is not asked for, so an OAuth session cannot write it.
   */
  signIn: boolean;
  /** Its table in the appview's index. */
  table: Table;
  /** What a sentence that refuses to write one calls it. */
  noun: string;
  /** The record, from a value its lexicon passed: throws InvalidRecord for a rule beyond the lexicon. */
  parse: (value: Record<string, unknown>) => R;
  /** The columns of its row in the appview's index beyond those every forge row has. */
  row: (record: R) => Record<string, unknown>;
}

/** Gives a kind its literal types (name, collection, table), which the table of kinds keys on. */
export function forgeKind<Name extends string, Collection extends string, Table extends string, R>(
  kind: ForgeKind<Name, Collection, Table, R>,
): ForgeKind<Name, Collection, Table, R> {
  return kind;
}

export function checkRepoUri(nsid: string, uri: string): void {
  const u = parseAtUri(uri);
  if (u?.collection !== REPO_COLLECTION || !isValidRepoName(u.rkey))
    throw new InvalidRecord(nsid, 'it names no repository record');
}

export function checkSubject(nsid: string, uri: string, collections: string[]): string {
  const collection = parseAtUri(uri)?.collection;
  if (collection === undefined || !collections.includes(collection))
    throw new InvalidRecord(nsid, `its subject is not a ${collections.join(' or ')} record`);
  return collection;
}

/** The parts of an at-uri the kind's `parse` already checked. */
export function uriOf(uri: string): AtUri {
  const u = parseAtUri(uri);
  if (u === undefined) throw new Error(`a record the reader kept names no record: ${uri}`);
  return u;
}

/** createdAt in one form (UTC, milliseconds), so that rows sort by it as strings. */
export function storedTime(v: string): string {
  return new Date(v).toISOString();
}

/** What a pull request's and an issue's rows have alike; the state is worked out after (by the authority rule). */
export function itemRow(record: {
  repo: string;
  title: string;
  body?: string | undefined;
}): Record<string, unknown> {
  const repo = uriOf(record.repo);
  return {
    repo_did: repo.did,
    repo_name: repo.rkey,
    title: record.title,
    body: record.body ?? null,
    state: 'open',
    labels: '[]',
  };
}
