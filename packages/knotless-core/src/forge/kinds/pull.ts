// A pull request (dev.knotless.pull): its rounds, each a pack in the author's PDS.
import { isObjectId } from '../../git/refname.ts';
import { InvalidRecord, PULL, isValidBranch, type PullRecord, type Round } from '../records.ts';
import { checkRepoUri, forgeKind, itemRow, storedTime } from './kind.ts';
import pullLexicon from '../../../../../lexicons/dev/knotless/pull.json' with { type: 'json' };

/** A round as the appview's index keeps it (`PullTable.rounds`): its pack named by CID alone. */
export interface StoredRound {
  head: string;
  base: string;
  pack: { cid: string; size: number };
  createdAt: string;
}

export function storedRound(x: Round): StoredRound {
  return {
    head: x.head,
    base: x.base,
    pack: { cid: x.pack.ref.$link, size: x.pack.size },
    createdAt: storedTime(x.createdAt),
  };
}

export const PULL_KIND = forgeKind({
  name: 'pull',
  collection: PULL,
  lexicon: pullLexicon,
  signIn: true,
  table: 'pulls',
  noun: 'pull request',
  parse(value): PullRecord {
    const v = value as unknown as PullRecord;
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
  },
  row: (r) => ({
    ...itemRow(r),
    base: r.base,
    head_repo: r.head.repo,
    head_branch: r.head.branch,
    rounds: JSON.stringify(r.rounds.map(storedRound)),
    merged: null,
    ignored_checks: null,
  }),
});
