// The forge's records as the CLI reads them: checked against the lexicons (bundled here) and the
// rules beyond them. The shapes, collections and at-uris are the core's (knotless-core/forge/records).
import { isObjectId } from 'knotless-core/git/refname';
import { REPO_COLLECTION } from 'knotless-core/records/collections';
import { isValidRepoName } from 'knotless-core/records/name';
import {
  COMMENT,
  ISSUE,
  ISSUE_STATE,
  InvalidRecord,
  PULL,
  PULL_STATUS,
  isValidBranch,
  parseAtUri,
  type CommentRecord,
  type IssueRecord,
  type IssueStateRecord,
  type PullRecord,
  type PullStatusRecord,
} from 'knotless-core/forge/records';
import { lexiconProblem } from './lexicons.ts';

export * from 'knotless-core/forge/records';

function invalid(nsid: string, why: string): InvalidRecord {
  return new InvalidRecord(nsid, why);
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
