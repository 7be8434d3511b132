// The forge's records (pull requests, issues, their states, comments, stars): collections, shapes
// and at-uris, the one contract the CLI and the appview both read and write (read.ts reads them, each
// kind by its module in kinds/).
// The lexicon documents are bundled by each front end, so the lexicon check is handed in.
import { isValidDid, isValidRecordKey, parseAtUriString } from '@atproto/syntax';
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
export const STAR = 'dev.knotless.star';
/** A check's verdict on a commit, in the runner's account. */
export const CHECK = 'dev.knotless.check';
/** A repository's branch protection, in the owner's account, keyed by the repository's name. */
export const PROTECTION = 'dev.knotless.protection';

/** The MIME type of a round's pack blob. */
export const PACK_MIME = 'application/x-git-packed-objects';

/** The parts of `at://<did>/<collection>/<rkey>`. */
export interface AtUri {
  did: string;
  collection: string;
  rkey: string;
}

/**
 * Parses an at-uri naming one record by its account's DID, or undefined when it is not one: atproto's
 * own syntax (@atproto/syntax), and only a DID for the authority, since a handle in a uri can change
 * owner.
 */
export function parseAtUri(uri: string): AtUri | undefined {
  const parsed = parseAtUriString(uri);
  if (!parsed.success) return undefined;
  const { authority, collection, rkey, hash } = parsed.value;
  if (hash !== undefined || collection === undefined || rkey === undefined) return undefined;
  if (!isValidDid(authority) || !isValidRecordKey(rkey)) return undefined;
  return { did: authority, collection, rkey };
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
  /** A merge that overrode the base branch's protection: each required check that had not passed, why. */
  ignoredChecks?: string[];
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
  /** A line of the round's diff it is about: the file (new side's path) and the new side's line. */
  path?: string;
  line?: number;
  body: string;
  createdAt: string;
}

/** A star: `subject` is the starred repository's record. */
export interface StarRecord {
  subject: string;
  createdAt: string;
}

/** The states a check can be in; any other is no state. */
export const CHECK_STATES = ['pending', 'success', 'failure', 'error'] as const;
export type CheckState = (typeof CHECK_STATES)[number];

/** A check's verdict on one commit of `repo`, in the runner's account (its authority). */
export interface CheckRecord {
  repo: string;
  commit: string;
  context: string;
  state: CheckState;
  targetUrl?: string;
  description?: string;
  createdAt: string;
}

/** One branch's protection: what a merge into it waits for, and what a push may do to it. */
export interface BranchProtection {
  branch: string;
  /** Check contexts a commit needs a success for, from a trusted runner, before a merge. */
  requiredChecks: string[];
  /** The runners (DIDs) whose checks count, beside the owner's own. */
  trustedRunners: string[];
  allowForcePush: boolean;
  allowDeletion: boolean;
}

/** A repository's protection record: `repo` is the repository's record, its key the repository's name. */
export interface ProtectionRecord {
  repo: string;
  branches: BranchProtection[];
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

/**
 * What a lexicon cannot say about a comment on a line: `path` and `line` come together, with the
 * `round` whose diff they point into, on a pull request; the path says nothing a terminal would act
 * on. Undefined when the comment is fine (a comment on no line always is).
 */
export function lineCommentProblem(c: {
  subjectCollection: string;
  round?: number | undefined;
  path?: string | undefined;
  line?: number | undefined;
}): string | undefined {
  if (c.path === undefined && c.line === undefined) return undefined;
  if (c.path === undefined || c.line === undefined) return 'path and line come together';
  if (c.round === undefined || c.subjectCollection !== PULL)
    return "a line is a line of a pull request round's diff: it needs round";
  if (hasUnsafe(c.path)) return 'path holds characters a terminal would act on';
  return undefined;
}
