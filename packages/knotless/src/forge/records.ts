import { KnotlessError } from 'knotless-core/errors';
import { isObjectId, isValidRefName } from 'knotless-core/git/refname';
import { REPO_COLLECTION } from 'knotless-core/records/collections';
import { isValidRepoName } from 'knotless-core/records/name';
import type { BlobRef } from 'knotless-core/records/ref-record';
import { hasUnsafe, safeText } from 'knotless-core/text/terminal';
import { lexiconProblem } from './lexicons.ts';

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

function invalid(nsid: string, why: string): InvalidRecord {
  return new InvalidRecord(nsid, why);
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

function checkRepoUri(nsid: string, uri: string): void {
  const u = parseAtUri(uri);
  if (u?.collection !== REPO_COLLECTION || !isValidRepoName(u.rkey))
    throw invalid(nsid, 'it names no repository record');
}

function checkSubject(nsid: string, uri: string, collections: string[]): void {
  if (!collections.includes(parseAtUri(uri)?.collection ?? ''))
    throw invalid(nsid, `its subject is not a ${collections.join(' or ')} record`);
}

/** A branch name as git would take it, and nothing a terminal would act on. */
export function isValidBranch(name: string): boolean {
  return isValidRefName(`refs/heads/${name}`) && !hasUnsafe(name);
}

/**
 * Checks a record read from the network against its lexicon, then what the lexicon cannot say
 * (hex object ids, which collection a uri names, branch names git accepts). Throws `corrupt-remote`
 * with the reason; the caller skips the record and says so, never using half of it.
 */
async function validated(nsid: string, value: unknown): Promise<Record<string, unknown>> {
  const problem = await lexiconProblem(nsid, value);
  if (problem !== undefined) throw invalid(nsid, problem);
  return value as Record<string, unknown>;
}

export async function parsePull(value: unknown): Promise<PullRecord> {
  const v = (await validated(PULL, value)) as unknown as PullRecord;
  checkRepoUri(PULL, v.repo);
  checkRepoUri(PULL, v.head.repo);
  if (!isValidBranch(v.base) || !isValidBranch(v.head.branch))
    throw invalid(PULL, 'a branch name is invalid');
  for (const r of v.rounds)
    if (!isObjectId(r.head) || !isObjectId(r.base)) throw invalid(PULL, 'a round names no commit');
  return {
    repo: v.repo,
    base: v.base,
    head: { repo: v.head.repo, branch: v.head.branch },
    title: v.title,
    ...(v.body === undefined ? {} : { body: v.body }),
    rounds: v.rounds.map((r) => ({
      head: r.head,
      base: r.base,
      pack: { $type: 'blob', ref: { $link: r.pack.ref.$link }, mimeType: r.pack.mimeType, size: r.pack.size },
      createdAt: r.createdAt,
    })),
    createdAt: v.createdAt,
  };
}

export async function parsePullStatus(value: unknown): Promise<PullStatusRecord> {
  const v = (await validated(PULL_STATUS, value)) as unknown as PullStatusRecord;
  checkSubject(PULL_STATUS, v.pull, [PULL]);
  // The lexicon lists known values only (open to new ones): a state this version does not know is no state.
  if (!['open', 'closed', 'merged'].includes(v.status)) throw invalid(PULL_STATUS, 'its status is unknown');
  if (v.merged !== undefined && !isObjectId(v.merged)) throw invalid(PULL_STATUS, 'merged is no commit');
  return {
    pull: v.pull,
    status: v.status,
    ...(v.merged === undefined ? {} : { merged: v.merged }),
    ...(v.labels === undefined ? {} : { labels: [...v.labels] }),
    createdAt: v.createdAt,
  };
}

export async function parseIssue(value: unknown): Promise<IssueRecord> {
  const v = (await validated(ISSUE, value)) as unknown as IssueRecord;
  checkRepoUri(ISSUE, v.repo);
  return {
    repo: v.repo,
    title: v.title,
    ...(v.body === undefined ? {} : { body: v.body }),
    createdAt: v.createdAt,
  };
}

export async function parseIssueState(value: unknown): Promise<IssueStateRecord> {
  const v = (await validated(ISSUE_STATE, value)) as unknown as IssueStateRecord;
  checkSubject(ISSUE_STATE, v.issue, [ISSUE]);
  if (!['open', 'closed'].includes(v.state)) throw invalid(ISSUE_STATE, 'its state is unknown');
  return {
    issue: v.issue,
    state: v.state,
    ...(v.labels === undefined ? {} : { labels: [...v.labels] }),
    createdAt: v.createdAt,
  };
}

export async function parseComment(value: unknown): Promise<CommentRecord> {
  const v = (await validated(COMMENT, value)) as unknown as CommentRecord;
  checkSubject(COMMENT, v.subject, [PULL, ISSUE]);
  return {
    subject: v.subject,
    ...(v.round === undefined ? {} : { round: v.round }),
    body: v.body,
    createdAt: v.createdAt,
  };
}

/** The JSON a record is written as: its type, and no field that is undefined. */
export function writeRecord(nsid: string, record: object): Record<string, unknown> {
  return JSON.parse(JSON.stringify({ $type: nsid, ...record })) as Record<string, unknown>;
}
