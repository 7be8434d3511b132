// One branch written by an operation that made its commit itself (a pull request's merge, `repo
// commit`) into a repository with maintainers (format.md, "Teams"). It goes through the push's own
// team write (team-push.ts): the writer's entry names in `over` the values it replaced and is
// confirmed against every other writer's table after the write, as a push from git is. An entry
// written into the writer's table directly would replace nobody's in the rule's eyes, so every
// reader would list the other writers' values as a divergence, and it could replace a value it
// does not contain.
import path from 'node:path';
import type { BlobCache } from '../../cache/blob-cache.ts';
import { KnotlessError, type PushReason } from '../../errors.ts';
import { lastTeamRead } from '../../records/read-refs.ts';
import type { RemoteRef, RemoteRepo } from '../../records/remote-repo.ts';
import type { Authorizer } from '../../xrpc/client.ts';
import { safeText } from '../../text/terminal.ts';
import { pushRefs } from './push.ts';

/** What the write needs: the team's repository as its last listing read it, and the new commit. */
export interface BranchWrite {
  remote: RemoteRepo;
  auth: Authorizer;
  /** The account writing: the owner, or a maintainer the owner's table names. */
  pusher: { did: string; handle: string };
  /** A repository that holds `tip` and the values of `refs` (the merge's scratch, the commit's mirror). */
  gitDir: string;
  cache: BlobCache;
  cacheDir: string;
  /** Write the structure and the blobs as two packs. */
  split: boolean;
  /** The refs the commit was made on: the listing of `remote` that read its team. */
  refs: RemoteRef[];
  /** The branch's full ref name. */
  ref: string;
  /** The new commit; it descends from the branch's value in `refs` (a fast-forward). */
  tip: string;
}

/** How the write ended: the ref as the pusher's table now holds it, or git's reason it was refused. */
export type BranchWritten = { kind: 'written'; written: RemoteRef } | { kind: 'refused'; reason: PushReason };

/** Whether `remote`'s last listing read a team: its writes then go through {@link pushBranch}. */
export function hasTeam(remote: RemoteRepo): boolean {
  return lastTeamRead(remote) !== undefined;
}

/**
 * Pushes `tip` to `ref` as git would push it from `gitDir` without force, judged against `refs`:
 * `fetch first` when another writer's value meanwhile is not in it (nothing of this write is then
 * left standing). A failure of the whole write is thrown as a push's is.
 */
export async function pushBranch(w: BranchWrite): Promise<BranchWritten> {
  let written: RemoteRef | undefined;
  const pushed = await pushRefs(
    {
      remote: w.remote,
      auth: w.auth,
      pusher: w.pusher,
      gitDir: w.gitDir,
      objectsDir: () => Promise.resolve(path.join(w.gitDir, 'objects')),
      cache: w.cache,
      cacheDir: w.cacheDir,
      // One new pack after the branch's list, as a merge or a commit into a table writes it.
      fold: false,
      split: w.split,
      migrate: false,
      chatter: { verbosity: 0, progress: false },
      options: { dryRun: false, atomic: false, cas: new Map() },
      // Not git's listing: the push checks the fast-forward itself, on the objects in `gitDir`.
      listing: () =>
        Promise.resolve({
          refs: new Map(w.refs.map((r) => [r.record.ref, r])),
          contested: new Map(),
          shownToGit: false,
        }),
      remember: (all) => {
        for (const o of all) if (o.dst === w.ref && o.record) written = o.record;
        return Promise.resolve();
      },
    },
    [{ src: w.tip, dst: w.ref, force: false }],
  );
  const outcome = pushed.outcomes[0]!;
  if (outcome.error !== undefined) {
    if (outcome.error === 'fetch first') {
      const diverged = divergedRefusal(w.remote, w.ref);
      if (diverged !== undefined) throw diverged;
    }
    return { kind: 'refused', reason: outcome.error };
  }
  // Nothing written: the branch held the commit already (another writer's push brought it).
  written ??= w.refs.find((r) => r.record.ref === w.ref && r.record.target === w.tip);
  if (written === undefined) throw new Error(`the push of ${w.ref} answered ok without a record`);
  return { kind: 'written', written };
}

/**
 * The refusal of a write to `ref` while its writers' values diverge (a racer refused and killed before
 * it withdrew its value): a commit made on the repository's value lacks the others, so trying again
 * cannot help, and only a push of a merge of them ends it. Undefined when `ref` has one value.
 */
function divergedRefusal(remote: RemoteRepo, ref: string): KnotlessError | undefined {
  const team = lastTeamRead(remote);
  const value = team?.refs.get(ref);
  const others = (value?.divergent ?? []).filter((d) => d.target !== undefined);
  if (team === undefined || value?.target === undefined || others.length === 0) return undefined;
  const name = (did: string): string =>
    safeText(
      did === remote.owner.did
        ? (remote.owner.handle ?? did)
        : (team.members.find((m) => m.did === did)?.name ?? did),
    );
  const values = [{ did: value.by, target: value.target }, ...others]
    .map((v) => `${name(v.did)}'s ${v.target!.slice(0, 12)}`)
    .join(', ');
  return new KnotlessError(
    'push-rejected',
    `${safeText(ref.replace(/^refs\/heads\//, ''))} of ${remote.label} has diverged (${values}, none containing the others); nothing was written: push a merge of them to it (\`knotless repo info\` says where each is listed), then try again.`,
  );
}
