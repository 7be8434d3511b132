import type { GitReason } from '../../errors.ts';
import { isAncestor } from '../../git/objects.ts';
import { ZERO_OID } from '../../git/refname.ts';
import { GitError } from '../../git/run.ts';
import type { RemoteRef } from '../../records/remote-repo.ts';

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
 * Run again after every compare-and-swap conflict, on the state read back. `gitDir` is the
 * repository pushed from, where fast-forwards are checked.
 */
export async function checkUpdate(
  u: Update,
  current: RemoteRef | undefined,
  lease: string | undefined,
  present: (oid: string) => boolean | Promise<boolean>,
  gitDir: string,
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
    if (await isAncestor(cur, u.oid, { gitDir })) return { kind: 'write' };
  } catch (err) {
    // git refuses objects that are not commits (e.g. a tree pushed to a ref): no fast-forward
    // relation exists. Any other failure surfaces.
    if (!(err instanceof GitError)) throw err;
  }
  return { kind: 'reject', reason: 'non-fast forward' };
}
