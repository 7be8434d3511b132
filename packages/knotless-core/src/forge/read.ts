// Reading the forge's records: the one reader the CLI and the appview both use, so that a record one
// of them keeps the other keeps too. A record is checked against its lexicon first (the check is
// handed in: each front end bundles the lexicon documents, and loads @atproto/lexicon its own way),
// then against what a lexicon cannot say. A record that fails throws InvalidRecord, with the rule it
// broke; the caller skips it whole, never using half of it.
import { isObjectId } from '../git/refname.ts';
import { REPO_COLLECTION } from '../records/collections.ts';
import { isValidRepoName } from '../records/name.ts';
import { hasUnsafe } from '../text/terminal.ts';
import {
  CHECK,
  CHECK_STATES,
  COMMENT,
  ISSUE,
  ISSUE_STATE,
  InvalidRecord,
  PULL,
  PROTECTION,
  PULL_STATUS,
  STAR,
  isValidBranch,
  lineCommentProblem,
  parseAtUri,
  type CheckRecord,
  type CommentRecord,
  type ForgeCollection,
  type ForgeRecord,
  type IssueRecord,
  type IssueStateRecord,
  type ProtectionRecord,
  type PullRecord,
  type PullStatusRecord,
  type StarRecord,
} from './records.ts';

/**
 * Why a record (its JSON form, blobs as `{$type: 'blob', ref: {$link}}`) is not a valid `nsid` record
 * by its lexicon, or undefined when it is.
 */
export type LexiconCheck = (nsid: string, value: unknown) => Promise<string | undefined>;

/** The forge's records read with one lexicon check. */
export interface ForgeReader {
  pull: (value: unknown) => Promise<PullRecord>;
  pullStatus: (value: unknown) => Promise<PullStatusRecord>;
  issue: (value: unknown) => Promise<IssueRecord>;
  issueState: (value: unknown) => Promise<IssueStateRecord>;
  comment: (value: unknown) => Promise<CommentRecord>;
  star: (value: unknown) => Promise<StarRecord>;
  check: (value: unknown) => Promise<CheckRecord>;
  protection: (value: unknown) => Promise<ProtectionRecord>;
  /** A record of any forge collection, with its collection. */
  any: (collection: ForgeCollection, value: unknown) => Promise<ForgeRecord>;
}

function checkRepoUri(nsid: string, uri: string): void {
  const u = parseAtUri(uri);
  if (u?.collection !== REPO_COLLECTION || !isValidRepoName(u.rkey))
    throw new InvalidRecord(nsid, 'it names no repository record');
}

function checkSubject(nsid: string, uri: string, collections: string[]): string {
  const collection = parseAtUri(uri)?.collection;
  if (collection === undefined || !collections.includes(collection))
    throw new InvalidRecord(nsid, `its subject is not a ${collections.join(' or ')} record`);
  return collection;
}

export function forgeReader(lexiconProblem: LexiconCheck): ForgeReader {
  async function validated(nsid: string, value: unknown): Promise<Record<string, unknown>> {
    const problem =
      typeof value !== 'object' || value === null || Array.isArray(value)
        ? 'it is not an object'
        : await lexiconProblem(nsid, value);
    if (problem !== undefined) throw new InvalidRecord(nsid, problem);
    return value as Record<string, unknown>;
  }

  async function pull(value: unknown): Promise<PullRecord> {
    const v = (await validated(PULL, value)) as unknown as PullRecord;
    checkRepoUri(PULL, v.repo);
    checkRepoUri(PULL, v.head.repo);
    if (!isValidBranch(v.base) || !isValidBranch(v.head.branch))
      throw new InvalidRecord(PULL, 'a branch name is invalid');
    for (const r of v.rounds)
      if (!isObjectId(r.head) || !isObjectId(r.base))
        throw new InvalidRecord(PULL, 'a round names no commit');
    return {
      repo: v.repo,
      base: v.base,
      head: { repo: v.head.repo, branch: v.head.branch },
      title: v.title,
      ...(v.body === undefined ? {} : { body: v.body }),
      rounds: v.rounds.map((r) => ({
        head: r.head,
        base: r.base,
        pack: {
          $type: 'blob',
          ref: { $link: r.pack.ref.$link },
          mimeType: r.pack.mimeType,
          size: r.pack.size,
        },
        createdAt: r.createdAt,
      })),
      createdAt: v.createdAt,
    };
  }

  async function pullStatus(value: unknown): Promise<PullStatusRecord> {
    const v = (await validated(PULL_STATUS, value)) as unknown as PullStatusRecord;
    checkSubject(PULL_STATUS, v.pull, [PULL]);
    // The lexicon lists known values only (open to new ones): a state this version does not know is no state.
    if (!['open', 'closed', 'merged'].includes(v.status))
      throw new InvalidRecord(PULL_STATUS, 'its status is unknown');
    if (v.merged !== undefined && !isObjectId(v.merged))
      throw new InvalidRecord(PULL_STATUS, 'merged is no commit');
    if (v.ignoredChecks !== undefined && (v.status !== 'merged' || v.ignoredChecks.some((c) => hasUnsafe(c))))
      throw new InvalidRecord(
        PULL_STATUS,
        'ignoredChecks is for a merge, in lines without control characters',
      );
    return {
      pull: v.pull,
      status: v.status,
      ...(v.merged === undefined ? {} : { merged: v.merged }),
      ...(v.ignoredChecks === undefined ? {} : { ignoredChecks: [...v.ignoredChecks] }),
      ...(v.labels === undefined ? {} : { labels: [...v.labels] }),
      createdAt: v.createdAt,
    };
  }

  async function issue(value: unknown): Promise<IssueRecord> {
    const v = (await validated(ISSUE, value)) as unknown as IssueRecord;
    checkRepoUri(ISSUE, v.repo);
    return {
      repo: v.repo,
      title: v.title,
      ...(v.body === undefined ? {} : { body: v.body }),
      createdAt: v.createdAt,
    };
  }

  async function issueState(value: unknown): Promise<IssueStateRecord> {
    const v = (await validated(ISSUE_STATE, value)) as unknown as IssueStateRecord;
    checkSubject(ISSUE_STATE, v.issue, [ISSUE]);
    if (!['open', 'closed'].includes(v.state)) throw new InvalidRecord(ISSUE_STATE, 'its state is unknown');
    return {
      issue: v.issue,
      state: v.state,
      ...(v.labels === undefined ? {} : { labels: [...v.labels] }),
      createdAt: v.createdAt,
    };
  }

  async function comment(value: unknown): Promise<CommentRecord> {
    const v = (await validated(COMMENT, value)) as unknown as CommentRecord;
    const subjectCollection = checkSubject(COMMENT, v.subject, [PULL, ISSUE]);
    const problem = lineCommentProblem({ ...v, subjectCollection });
    if (problem !== undefined) throw new InvalidRecord(COMMENT, problem);
    return {
      subject: v.subject,
      ...(v.round === undefined ? {} : { round: v.round }),
      ...(v.path === undefined ? {} : { path: v.path, line: v.line! }),
      body: v.body,
      createdAt: v.createdAt,
    };
  }

  async function star(value: unknown): Promise<StarRecord> {
    const v = (await validated(STAR, value)) as unknown as StarRecord;
    checkRepoUri(STAR, v.subject);
    return { subject: v.subject, createdAt: v.createdAt };
  }

  async function check(value: unknown): Promise<CheckRecord> {
    const v = (await validated(CHECK, value)) as unknown as CheckRecord;
    checkRepoUri(CHECK, v.repo);
    if (!isObjectId(v.commit)) throw new InvalidRecord(CHECK, 'its commit is not a 40-hex commit id');
    if (hasUnsafe(v.context)) throw new InvalidRecord(CHECK, 'its context holds control characters');
    // The lexicon lists known values only (open to new ones): a state this version does not know is no state.
    if (!(CHECK_STATES as readonly string[]).includes(v.state))
      throw new InvalidRecord(CHECK, 'its state is unknown');
    if (v.targetUrl !== undefined && !/^https?:\/\//i.test(v.targetUrl))
      throw new InvalidRecord(CHECK, 'its targetUrl is not an https or http address');
    // Printed wherever checks are listed: a line break, an escape sequence or a bidi override in it
    // could forge or reorder the lines around it, so the record is refused, not cleaned per reader.
    if (v.description !== undefined && hasUnsafe(v.description))
      throw new InvalidRecord(CHECK, 'its description holds control characters (it is one line of text)');
    return {
      repo: v.repo,
      commit: v.commit,
      context: v.context,
      state: v.state,
      ...(v.targetUrl === undefined ? {} : { targetUrl: v.targetUrl }),
      ...(v.description === undefined ? {} : { description: v.description }),
      createdAt: v.createdAt,
    };
  }

  async function protection(value: unknown): Promise<ProtectionRecord> {
    const v = (await validated(PROTECTION, value)) as unknown as ProtectionRecord;
    checkRepoUri(PROTECTION, v.repo);
    const seen = new Set<string>();
    for (const b of v.branches) {
      if (!isValidBranch(b.branch)) throw new InvalidRecord(PROTECTION, 'a branch name is invalid');
      if (seen.has(b.branch)) throw new InvalidRecord(PROTECTION, 'a branch is protected twice');
      seen.add(b.branch);
      if ((b.requiredChecks ?? []).some((c) => hasUnsafe(c)))
        throw new InvalidRecord(PROTECTION, 'a required check holds control characters');
    }
    return {
      repo: v.repo,
      branches: v.branches.map((b) => ({
        branch: b.branch,
        requiredChecks: [...new Set(b.requiredChecks ?? [])],
        trustedRunners: [...new Set(b.trustedRunners ?? [])],
        // Absent means not allowed: a protection written by an older writer protects at least as much.
        allowForcePush: b.allowForcePush === true,
        allowDeletion: b.allowDeletion === true,
      })),
      createdAt: v.createdAt,
    };
  }

  async function any(collection: ForgeCollection, value: unknown): Promise<ForgeRecord> {
    switch (collection) {
      case PULL:
        return { collection, record: await pull(value) };
      case PULL_STATUS:
        return { collection, record: await pullStatus(value) };
      case ISSUE:
        return { collection, record: await issue(value) };
      case ISSUE_STATE:
        return { collection, record: await issueState(value) };
      case COMMENT:
        return { collection, record: await comment(value) };
      case STAR:
        return { collection, record: await star(value) };
      case CHECK:
        return { collection, record: await check(value) };
      case PROTECTION:
        return { collection, record: await protection(value) };
    }
  }

  return { pull, pullStatus, issue, issueState, comment, star, check, protection, any };
}
