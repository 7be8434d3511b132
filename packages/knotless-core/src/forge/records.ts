// The forge's records (pull requests, issues, their states, comments): collections, shapes and
// at-uris, shared by the CLI and the appview. Reading checks against the lexicons live with each
// front end (they bundle the lexicon documents); checkToWrite takes that check as an argument.
import { KnotlessError } from '../errors.ts';
import { isValidRefName } from '../git/refname.ts';
import { REPO_COLLECTION } from '../records/collections.ts';
import type { BlobRef } from '../records/ref-record.ts';
import { hasUnsafe, safeText } from '../text/terminal.ts';

/** The forge's collections (lexicons in lexicons/dev/knotless/, FORGE.md). */
export const PULL = 'dev.knotless.pull';
export const PULL_STATUS = 'dev.knotless.pull.status';
export const ISSUE = 'dev.knotless.issue';
export const ISSUE_STATE = 'dev.knotless.issue.state';
export const COMMENT = 'dev.knotless.comment';

/** The MIME type of a round's pack blob. */
export const PACK_MIME = 'application/x-git-packed-objects';

/** The parts of `at://<did>/<collection>/<rkey>`. */
export interface AtUri {
  did: string;
  collection: string;
  rkey: string;
}

const AT_URI =
  /^at:\/\/(did:[a-z]+:[A-Za-z0-9._:%-]{1,2000})\/([a-zA-Z0-9.-]{1,317})\/([A-Za-z0-9._:~-]{1,512})$/;

/** Parses an at-uri naming one record, or undefined when it is not one. */
export function parseAtUri(uri: string): AtUri | undefined {
  const m = AT_URI.exec(uri);
  return m === null ? undefined : { did: m[1]!, collection: m[2]!, rkey: m[3]! };
}

export function atUri(did: string, collection: string, rkey: string): string {
  return `at://${did}/${collection}/${rkey}`;
}

/** The at-uri of a repository's record, which identifies the repository (FORGE.md). */
export function repoUri(did: string, name: string): string {
  return atUri(did, REPO_COLLECTION, name);
}

export interface Round {
  head: string;
  base: string;
  pack: BlobRef;
  createdAt: string;
}

export interface PullRecord {
  repo: string;
  base: string;
  head: { repo: string; branch: string };
  title: string;
  body?: string;
  rounds: Round[];
  createdAt: string;
}

export type PullState = 'open' | 'closed' | 'merged';
export type IssueStateValue = 'open' | 'closed';

export interface PullStatusRecord {
  pull: string;
  status: PullState;
  merged?: string;
  labels?: string[];
  createdAt: string;
}

export interface IssueRecord {
  repo: string;
  title: string;
  body?: string;
  createdAt: string;
}

export interface IssueStateRecord {
  issue: string;
  state: IssueStateValue;
  labels?: string[];
  createdAt: string;
}

export interface CommentRecord {
  subject: string;
  round?: number;
  body: string;
  createdAt: string;
}

/** A record that fails its lexicon or the checks beyond it; `why` says which rule. */
export class InvalidRecord extends KnotlessError {
  override name = 'InvalidRecord';
  readonly why: string;

  constructor(nsid: string, why: string) {
    super('corrupt-remote', `An invalid ${nsid} record (${safeText(why, 200)}) was ignored.`);
    this.why = why;
  }
}

/**
 * Checks a record about to be written exactly as its readers will, so that nothing is written
 * that every reader would skip; the user is told which rule it breaks.
 */
export async function checkToWrite(
  parse: (v: unknown) => Promise<unknown>,
  record: object,
  what: string,
): Promise<void> {
  try {
    await parse(JSON.parse(JSON.stringify(record)));
  } catch (err) {
    if (!(err instanceof InvalidRecord)) throw err;
    throw new KnotlessError('usage', `The ${what} cannot be written: ${safeText(err.why, 200)}.`, {
      cause: err,
    });
  }
}

/** A branch name as git would take it, and nothing a terminal would act on. */
export function isValidBranch(name: string): boolean {
  return isValidRefName(`refs/heads/${name}`) && !hasUnsafe(name);
}

/** The JSON a record is written as: its type, and no field that is undefined. */
export function writeRecord(nsid: string, record: object): Record<string, unknown> {
  return JSON.parse(JSON.stringify({ $type: nsid, ...record })) as Record<string, unknown>;
}
