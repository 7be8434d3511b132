// A round's record names a head repository and branch, but its commits come from the pack in the
// author's account: nothing makes them the branch's. `pr view` checks each round's head against
// the branch as it is now, so a round claiming to come from someone else's branch is marked.
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { Mirror } from 'knotless-core/cache/mirror';
import { isKnotlessError } from 'knotless-core/errors';
import { GitError, runGit } from 'knotless-core/git/run';
import { safeText } from 'knotless-core/text/terminal';
import type { Context } from '../context.ts';
import { branchOf, syncRef } from 'knotless-core/forge/packs';
import { parseAtUri, type PullRecord } from './records.ts';
import { REPO_COLLECTION } from 'knotless-core/records/collections';

/** What the rounds were checked against, and which of them the branch holds. */
export interface RoundCheck {
  /** The head repository, as `handle/name`, and its branch. */
  repo: string;
  branch: string;
  /** The branch's commit now, when it could be read. */
  tip?: string;
  /** For each round, whether its head is the branch's commit or in its history. */
  onBranch?: boolean[];
  /** Why the rounds could not be checked. */
  reason?: string;
}

/** Checks every round's head against the head branch now: one listing of the head repository's refs and its packs (cached). */
export async function checkRounds(
  c: Context,
  warn: (m: string) => void,
  pull: PullRecord,
): Promise<RoundCheck> {
  const branch = safeText(pull.head.branch);
  const u = parseAtUri(pull.head.repo);
  if (u === undefined || u.collection !== REPO_COLLECTION)
    return { repo: safeText(pull.head.repo), branch, reason: 'it names no repository' };
  const owner = await c.resolver.resolve(u.did);
  const repo = `${safeText(owner.handle ?? u.did)}/${safeText(u.rkey)}`;
  try {
    const remote = c.remoteRepo(owner, u.rkey, warn);
    const ref = await branchOf(remote, pull.head.branch);
    const tip = ref.record.target!;
    const mirror = new Mirror(c.config.cacheDir, owner.did, u.rkey);
    await syncRef(mirror, remote, ref, new BlobCache(c.config.cacheDir), c.config.maxObjectBytes);
    const onBranch: boolean[] = [];
    for (const round of pull.rounds) {
      const held = await runGit(['merge-base', '--is-ancestor', round.head, tip], {
        gitDir: mirror.gitDir,
        okCodes: [1, 128],
      });
      onBranch.push(held.code === 0);
    }
    return { repo, branch, tip, onBranch };
  } catch (err) {
    if (!isKnotlessError(err) && !(err instanceof GitError)) throw err;
    return { repo, branch, reason: safeText(err.message.replace(/\.$/, '')) };
  }
}
