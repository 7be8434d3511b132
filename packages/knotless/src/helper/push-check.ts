import type { GitReason } from 'knotless-core/errors';
import { isAncestor } from 'knotless-core/git/objects';
import { ZERO_OID } from 'knotless-core/git/refname';
import { GitError } from 'knotless-core/git/run';
import type { RemoteRef } from 'knotless-core/records/remote-repo';

/** One `push` line, resolved: where to, what to (undefined: delete), forced or not. */
export interface Update {
  dst: string;
  force: boolean;
  /** The new object id; undefined for a delete. */
  oid: string | undefined;
  /** For an annotated tag, the object it points at. */
  peeled: string | undefined;
}

/** What a push may do to one ref, given what the remote holds now. */
export type Verdict = { kind: 'write' } | { kind: 'up-to-date' } | { kind: 'reject'; reason: GitReason };

/**
 * Decides an update against the remote's current state with git's own rules and words (git's
 * transport reads the reason: "fetch first", "non-fast forward", "stale info", "already exists").
 * Run again after every compare-and-swap conflict, on the state read back.
 */
export async function checkUpdate(
  u: Update,
  current: RemoteRef | undefined,
  lease: string | undefined,
  present: (oid: string) => boolean | Promise<boolean>,
): Promise<Verdict> {
  const cur = current?.record.target;
  if (lease !== undefined) {
    const expected = lease === ZERO_OID ? undefined : lease;
    if (cur !== expected) return { kind: 'reject', reason: 'stale info' };
    return cur === u.oid ? { kind: 'up-to-date' } : { kind: 'write' };
  }
  if (cur === u.oid) return { kind: 'up-to-date' };
  if (u.oid === undefined || cur === undefined || u.force) return { kind: 'write' };
  if (u.dst.startsWith('refs/tags/')) return { kind: 'reject', reason: 'already exists' };
  if (!(await present(cur))) return { kind: 'reject', reason: 'fetch first' };
  try {
    if (await isAncestor(cur, u.oid)) return { kind: 'write' };
  } catch (err) {
    // git refuses objects that are not commits (e.g. a tree pushed to a ref): no fast-forward
    // relation exists. Any other failure surfaces.
    if (!(err instanceof GitError)) throw err;
  }
  return { kind: 'reject', reason: 'non-fast forward' };
}
