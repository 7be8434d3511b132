import { Lexicons, jsonToLex, type LexiconDoc } from '@atproto/lexicon';
import { REPO_COLLECTION, isValidRefName, isValidRepoName } from 'knotless-core';
import {
  COMMENT,
  ISSUE,
  ISSUE_STATE,
  PULL,
  PULL_STATUS,
  STAR,
  lineCommentProblem,
} from 'knotless-core/forge/records';
import { hasUnsafe } from 'knotless-core/text/terminal';
import comment from '../../../../lexicons/dev/knotless/comment.json' with { type: 'json' };
import issue from '../../../../lexicons/dev/knotless/issue.json' with { type: 'json' };
import issueState from '../../../../lexicons/dev/knotless/issue/state.json' with { type: 'json' };
import pull from '../../../../lexicons/dev/knotless/pull.json' with { type: 'json' };
import pullStatus from '../../../../lexicons/dev/knotless/pull/status.json' with { type: 'json' };
import star from '../../../../lexicons/dev/knotless/star.json' with { type: 'json' };

// The names are the CLI's (knotless-core's forge/records.ts): one definition for writer and reader.
export const PULL_COLLECTION = PULL;
export const PULL_STATUS_COLLECTION = PULL_STATUS;
export const ISSUE_COLLECTION = ISSUE;
export const ISSUE_STATE_COLLECTION = ISSUE_STATE;
export const COMMENT_COLLECTION = COMMENT;
export const STAR_COLLECTION = STAR;

/** The forge's record collections (and stars), in the order a backfill reads them. */
export const FORGE_COLLECTIONS = [
  PULL_COLLECTION,
  PULL_STATUS_COLLECTION,
  ISSUE_COLLECTION,
  ISSUE_STATE_COLLECTION,
  COMMENT_COLLECTION,
  STAR_COLLECTION,
] as const;
export type ForgeCollection = (typeof FORGE_COLLECTIONS)[number];

export function isForgeCollection(c: string): c is ForgeCollection {
  return (FORGE_COLLECTIONS as readonly string[]).includes(c);
}

// The lexicon documents are the contract (FORGE.md): records are checked against the JSON files
// themselves, by @atproto/lexicon, so the appview cannot drift from what the CLI writes.
const lexicons = new Lexicons([
  pull,
  pullStatus,
  issue,
  issueState,
  comment,
  star,
] as unknown as LexiconDoc[]);

/** A record that failed validation: skipped whole, never half-used, with the reason logged. */
export class InvalidRecord extends Error {
  override name = 'InvalidRecord';
}

/** An at-uri of a record, split; only DID authorities count (a handle in a uri can change owner). */
export interface RecordUri {
  did: string;
  collection: string;
  rkey: string;
}

const AT_URI = /^at:\/\/(did:[a-z]+:[A-Za-z0-9._:%-]+)\/([a-zA-Z0-9.-]+)\/([A-Za-z0-9._~:-]{1,512})$/;

/** Splits `at://<did>/<collection>/<rkey>`; undefined for anything else. */
export function parseRecordUri(uri: string): RecordUri | undefined {
  const m = AT_URI.exec(uri);
  return m === null ? undefined : { did: m[1]!, collection: m[2]!, rkey: m[3]! };
}

export function recordUri(did: string, collection: string, rkey: string): string {
  return `at://${did}/${collection}/${rkey}`;
}

function uriIn(uri: string, collections: string[], field: string): RecordUri {
  const u = parseRecordUri(uri);
  if (u === undefined || !collections.includes(u.collection))
    throw new InvalidRecord(`${field} is not an at://<did>/${collections.join('|')}/<key> uri`);
  if (u.collection === REPO_COLLECTION && !isValidRepoName(u.rkey))
    throw new InvalidRecord(`${field} names no valid repository`);
  return u;
}

/** A branch name as git takes it and nothing a terminal would act on: the CLI's rule too. */
function branch(name: string, field: string): string {
  if (!isValidRefName(`refs/heads/${name}`) || hasUnsafe(name))
    throw new InvalidRecord(`${field} is not a valid branch name`);
  return name;
}

const OID = /^[0-9a-f]{40}$/;
function oid(v: string, field: string): string {
  if (!OID.test(v)) throw new InvalidRecord(`${field} is not a 40-hex commit id`);
  return v;
}

/** createdAt in one form (UTC, milliseconds), so that records sort by it as strings. */
function time(v: string): string {
  return new Date(v).toISOString();
}

function validate<T>(collection: string, json: unknown): T {
  try {
    lexicons.assertValidRecord(collection, jsonToLex(json));
  } catch (err) {
    throw new InvalidRecord(err instanceof Error ? err.message : String(err), { cause: err });
  }
  return json as T;
}

export interface Round {
  head: string;
  base: string;
  pack: { cid: string; size: number };
  createdAt: string;
}

export interface PullRecord {
  repo: RecordUri;
  base: string;
  head: { repo: string; branch: string };
  title: string;
  body: string | undefined;
  rounds: Round[];
  createdAt: string;
}

export interface PullStatusRecord {
  pull: RecordUri;
  status: 'open' | 'closed' | 'merged';
  merged: string | undefined;
  labels: string[];
  createdAt: string;
}

export interface IssueRecord {
  repo: RecordUri;
  title: string;
  body: string | undefined;
  createdAt: string;
}

export interface IssueStateRecord {
  issue: RecordUri;
  state: 'open' | 'closed';
  labels: string[];
  createdAt: string;
}

export interface CommentRecord {
  subject: RecordUri;
  round: number | undefined;
  /** The line of the round's diff it is about, if any. */
  path: string | undefined;
  line: number | undefined;
  body: string;
  createdAt: string;
}

export type ForgeRecord =
  | { collection: typeof PULL_COLLECTION; record: PullRecord }
  | { collection: typeof PULL_STATUS_COLLECTION; record: PullStatusRecord }
  | { collection: typeof ISSUE_COLLECTION; record: IssueRecord }
  | { collection: typeof ISSUE_STATE_COLLECTION; record: IssueStateRecord }
  | { collection: typeof COMMENT_COLLECTION; record: CommentRecord }
  | { collection: typeof STAR_COLLECTION; record: StarRecord };

export interface StarRecord {
  /** The starred repository's record. */
  subject: RecordUri;
  createdAt: string;
}

interface RawPull {
  repo: string;
  base: string;
  head: { repo: string; branch: string };
  title: string;
  body?: string;
  rounds: { head: string; base: string; pack: { ref: { $link: string }; size: number }; createdAt: string }[];
  createdAt: string;
}

/**
 * A forge record (JSON form, as listRecords returns it) checked against its lexicon and the
 * contract's further rules (uris naming the right collection, commit ids in hex, known states).
 * Throws InvalidRecord with the reason.
 */
export function forgeRecordOf(collection: ForgeCollection, json: unknown): ForgeRecord {
  switch (collection) {
    case PULL_COLLECTION: {
      const r = validate<RawPull>(collection, json);
      uriIn(r.head.repo, [REPO_COLLECTION], 'head.repo');
      return {
        collection,
        record: {
          repo: uriIn(r.repo, [REPO_COLLECTION], 'repo'),
          base: branch(r.base, 'base'),
          head: { repo: r.head.repo, branch: branch(r.head.branch, 'head.branch') },
          title: r.title,
          body: r.body,
          rounds: r.rounds.map((x, i) => ({
            head: oid(x.head, `rounds[${i}].head`),
            base: oid(x.base, `rounds[${i}].base`),
            pack: { cid: x.pack.ref.$link, size: x.pack.size },
            createdAt: time(x.createdAt),
          })),
          createdAt: time(r.createdAt),
        },
      };
    }
    case PULL_STATUS_COLLECTION: {
      const r = validate<{
        pull: string;
        status: string;
        merged?: string;
        labels?: string[];
        createdAt: string;
      }>(collection, json);
      if (r.status !== 'open' && r.status !== 'closed' && r.status !== 'merged')
        throw new InvalidRecord(`status ${r.status} is not open, closed or merged`);
      return {
        collection,
        record: {
          pull: uriIn(r.pull, [PULL_COLLECTION], 'pull'),
          status: r.status,
          merged: r.merged === undefined ? undefined : oid(r.merged, 'merged'),
          labels: r.labels ?? [],
          createdAt: time(r.createdAt),
        },
      };
    }
    case ISSUE_COLLECTION: {
      const r = validate<{ repo: string; title: string; body?: string; createdAt: string }>(collection, json);
      return {
        collection,
        record: {
          repo: uriIn(r.repo, [REPO_COLLECTION], 'repo'),
          title: r.title,
          body: r.body,
          createdAt: time(r.createdAt),
        },
      };
    }
    case ISSUE_STATE_COLLECTION: {
      const r = validate<{ issue: string; state: string; labels?: string[]; createdAt: string }>(
        collection,
        json,
      );
      if (r.state !== 'open' && r.state !== 'closed')
        throw new InvalidRecord(`state ${r.state} is not open or closed`);
      return {
        collection,
        record: {
          issue: uriIn(r.issue, [ISSUE_COLLECTION], 'issue'),
          state: r.state,
          labels: r.labels ?? [],
          createdAt: time(r.createdAt),
        },
      };
    }
    case COMMENT_COLLECTION: {
      const r = validate<{
        subject: string;
        round?: number;
        path?: string;
        line?: number;
        body: string;
        createdAt: string;
      }>(collection, json);
      const subject = uriIn(r.subject, [PULL_COLLECTION, ISSUE_COLLECTION], 'subject');
      const problem = lineCommentProblem({ ...r, subjectCollection: subject.collection });
      if (problem !== undefined) throw new InvalidRecord(problem);
      return {
        collection,
        record: {
          subject,
          round: r.round,
          path: r.path,
          line: r.line,
          body: r.body,
          createdAt: time(r.createdAt),
        },
      };
    }
    case STAR_COLLECTION: {
      const r = validate<{ subject: string; createdAt: string }>(collection, json);
      return {
        collection,
        record: { subject: uriIn(r.subject, [REPO_COLLECTION], 'subject'), createdAt: time(r.createdAt) },
      };
    }
  }
}
