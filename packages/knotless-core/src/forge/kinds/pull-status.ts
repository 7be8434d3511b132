// A decision on a pull request (dev.knotless.pull.status): open, closed or merged, and the owner's labels.
import { isObjectId } from '../../git/refname.ts';
import { hasUnsafe } from '../../text/terminal.ts';
import { InvalidRecord, PULL, PULL_STATUS, type PullStatusRecord } from '../records.ts';
import { checkSubject, forgeKind, uriOf } from './kind.ts';
import pullStatusLexicon from '../../../../../lexicons/dev/knotless/pull/status.json' with { type: 'json' };

export const PULL_STATUS_KIND = forgeKind({
  name: 'pullStatus',
  collection: PULL_STATUS,
  lexicon: pullStatusLexicon,
  signIn: true,
  table: 'pull_statuses',
  noun: "pull request's state",
  parse(value): PullStatusRecord {
    const v = value as unknown as PullStatusRecord;
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
  },
  row(r) {
    const pull = uriOf(r.pull);
    return {
      pull_did: pull.did,
      pull_rkey: pull.rkey,
      status: r.status,
      merged: r.merged ?? null,
      ignored_checks: r.ignoredChecks === undefined ? null : JSON.stringify(r.ignoredChecks),
      labels: JSON.stringify(r.labels ?? []),
    };
  },
});
