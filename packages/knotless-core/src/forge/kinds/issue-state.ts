// A decision on an issue (dev.knotless.issue.state): open or closed, and the owner's labels.
import { ISSUE, ISSUE_STATE, InvalidRecord, type IssueStateRecord } from '../records.ts';
import { checkSubject, forgeKind, uriOf } from './kind.ts';
import issueStateLexicon from '../../../../../lexicons/dev/knotless/issue/state.json' with { type: 'json' };

export const ISSUE_STATE_KIND = forgeKind({
  name: 'issueState',
  collection: ISSUE_STATE,
  lexicon: issueStateLexicon,
  signIn: true,
  table: 'issue_states',
  noun: "issue's state",
  parse(value): IssueStateRecord {
    const v = value as unknown as IssueStateRecord;
    checkSubject(ISSUE_STATE, v.issue, [ISSUE]);
    if (!['open', 'closed'].includes(v.state)) throw new InvalidRecord(ISSUE_STATE, 'its state is unknown');
    return {
      issue: v.issue,
      state: v.state,
      ...(v.labels === undefined ? {} : { labels: [...v.labels] }),
      createdAt: v.createdAt,
    };
  },
  row(r) {
    const issue = uriOf(r.issue);
    return {
      issue_did: issue.did,
      issue_rkey: issue.rkey,
      state: r.state,
      labels: JSON.stringify(r.labels ?? []),
    };
  },
});
