import type { CommentRow, IssueRow, PullRow } from '../../db/forge-store.ts';
import { stateFilter, type StateFilter } from '../../model/states.ts';
import { atUri as recordUri, parseAtUri, type AtUri } from 'knotless-core/forge/records';
import type { StoredRound as Round } from '../../db/schema.ts';
import { XrpcHttpError } from './common.ts';

function author(did: string, handle: string | null): Record<string, unknown> {
  return { did, ...(handle === null ? {} : { handle }) };
}

/** The rounds a pull request row keeps, as the record had them. */
export function roundsOf(row: Pick<PullRow, 'rounds'>): Round[] {
  return JSON.parse(row.rounds) as Round[];
}

/** The lexicon's pullView: the record with its state by the authority rule. */
export function pullView(r: PullRow): Record<string, unknown> {
  return {
    uri: recordUri(r.did, 'dev.knotless.pull', r.rkey),
    cid: r.cid,
    author: author(r.did, r.handle),
    repo: recordUri(r.repo_did, 'dev.knotless.repo', r.repo_name),
    base: r.base,
    head: { repo: r.head_repo, branch: r.head_branch },
    title: r.title,
    ...(r.body === null ? {} : { body: r.body }),
    state: r.state,
    ...(r.merged === null ? {} : { merged: r.merged }),
    ...(r.ignored_checks === null ? {} : { ignoredChecks: JSON.parse(r.ignored_checks) as string[] }),
    labels: JSON.parse(r.labels) as string[],
    rounds: roundsOf(r),
    createdAt: r.created_at,
    indexedAt: r.indexed_at,
  };
}

/** The lexicon's issueView. */
export function issueView(r: IssueRow): Record<string, unknown> {
  return {
    uri: recordUri(r.did, 'dev.knotless.issue', r.rkey),
    cid: r.cid,
    author: author(r.did, r.handle),
    repo: recordUri(r.repo_did, 'dev.knotless.repo', r.repo_name),
    title: r.title,
    ...(r.body === null ? {} : { body: r.body }),
    state: r.state,
    labels: JSON.parse(r.labels) as string[],
    createdAt: r.created_at,
    indexedAt: r.indexed_at,
  };
}

/** The lexicon's commentView. */
export function commentView(r: CommentRow): Record<string, unknown> {
  return {
    uri: recordUri(r.did, 'dev.knotless.comment', r.rkey),
    cid: r.cid,
    author: author(r.did, r.handle),
    subject: recordUri(r.subject_did, r.subject_collection, r.subject_rkey),
    ...(r.round === null ? {} : { round: Number(r.round) }),
    ...(r.path === null ? {} : { path: r.path, line: Number(r.line) }),
    body: r.body,
    createdAt: r.created_at,
  };
}

/** A uri parameter naming a record of `collection`. */
export function uriParam(value: string, collection: string, name: string): AtUri {
  const u = parseAtUri(value);
  if (u === undefined || u.collection !== collection)
    throw new XrpcHttpError(400, 'InvalidRequest', `${name} must be an at://<did>/${collection}/<key> uri`);
  return u;
}

/** The `state` parameter, one of `allowed`, `open` when absent. */
export function stateParam(params: URLSearchParams, allowed: readonly StateFilter[]): StateFilter {
  const s = stateFilter(params.get('state'), allowed);
  if (s === undefined)
    throw new XrpcHttpError(400, 'InvalidRequest', `state must be one of ${allowed.join(', ')}`);
  return s;
}

/** The `cursor` parameter: an offset into the list, as listRepos pages. */
export function offsetParam(params: URLSearchParams): number {
  const offset = Number(params.get('cursor') ?? '0');
  if (!Number.isInteger(offset) || offset < 0) throw new XrpcHttpError(400, 'InvalidRequest', 'bad cursor');
  return offset;
}
