import type { SubjectView } from './appview.ts';
import { ISSUE_AUTHOR_MAY, PULL_AUTHOR_MAY } from 'knotless-core/records/forge-authority';
import {
  ISSUE,
  ISSUE_STATE,
  PACK_MIME,
  PULL,
  PULL_STATUS,
  parseIssue,
  parseIssueState,
  parsePull,
  parsePullStatus,
  type IssueRecord,
  type PullRecord,
} from './records.ts';

/** A state record reduced to what the authority rule reads. */
export interface StateFields {
  subject: string;
  state: string;
  merged?: string;
  labels?: string[];
  createdAt: string;
}

/** What differs between pull requests and issues; everything else is shared (subjects.ts). */
export interface Kind<R extends { repo: string; title: string; createdAt: string }> {
  noun: 'pull request' | 'issue';
  /** The CLI's command word: `pr` or `issue`. */
  word: 'pr' | 'issue';
  collection: string;
  stateCollection: string;
  states: readonly string[];
  parse: (v: unknown) => Promise<R>;
  parseState: (v: unknown) => Promise<StateFields>;
  authorMay: readonly string[];
  view: 'pull' | 'issue';
  list: 'pulls' | 'issues';
  /** The record an appview view describes (the CLI reads records, not views, where it can). */
  fromView: (v: SubjectView) => R;
}

export const PULLS: Kind<PullRecord> = {
  noun: 'pull request',
  word: 'pr',
  collection: PULL,
  stateCollection: PULL_STATUS,
  states: ['open', 'closed', 'merged'],
  parse: parsePull,
  async parseState(v) {
    const s = await parsePullStatus(v);
    return { subject: s.pull, state: s.status, ...s };
  },
  authorMay: PULL_AUTHOR_MAY,
  view: 'pull',
  list: 'pulls',
  fromView: (v) => ({
    repo: v.repo,
    base: v.base ?? '',
    head: v.head ?? { repo: v.repo, branch: '' },
    title: v.title,
    ...(v.body === undefined ? {} : { body: v.body }),
    rounds: (v.rounds ?? []).map((r) => ({
      head: r.head,
      base: r.base,
      pack: { $type: 'blob', ref: { $link: r.pack.cid }, mimeType: PACK_MIME, size: r.pack.size },
      createdAt: r.createdAt,
    })),
    createdAt: v.createdAt,
  }),
};

export const ISSUES: Kind<IssueRecord> = {
  noun: 'issue',
  word: 'issue',
  collection: ISSUE,
  stateCollection: ISSUE_STATE,
  states: ['open', 'closed'],
  parse: parseIssue,
  async parseState(v) {
    const s = await parseIssueState(v);
    return { subject: s.issue, ...s };
  },
  authorMay: ISSUE_AUTHOR_MAY,
  view: 'issue',
  list: 'issues',
  fromView: (v) => ({
    repo: v.repo,
    title: v.title,
    ...(v.body === undefined ? {} : { body: v.body }),
    createdAt: v.createdAt,
  }),
};
