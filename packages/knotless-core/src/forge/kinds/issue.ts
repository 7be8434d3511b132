// An issue (dev.knotless.issue) on a repository.
import { ISSUE, type IssueRecord } from '../records.ts';
import { checkRepoUri, forgeKind, itemRow } from './kind.ts';
import issueLexicon from '../../../../../lexicons/dev/knotless/issue.json' with { type: 'json' };

export const ISSUE_KIND = forgeKind({
  name: 'issue',
  collection: ISSUE,
  lexicon: issueLexicon,
  signIn: true,
  table: 'issues',
  noun: 'issue',
  parse(value): IssueRecord {
    const v = value as unknown as IssueRecord;
    checkRepoUri(ISSUE, v.repo);
    return {
      repo: v.repo,
      title: v.title,
      ...(v.body === undefined ? {} : { body: v.body }),
      createdAt: v.createdAt,
    };
  },
  row: (r) => itemRow(r),
});
