import type { GitReason, ProtectedReason, PushReason } from '../../errors.ts';
import { isAncestor } from '../../git/objects.ts';
import { ZERO_OID } from '../../git/refname.ts';
import { GitError, gitText } from '../../git/run.ts';
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
 * repository pushed from, where fast-forwards are checked. `shownToGit`: `current` is the value git
 * was listed and decided this update on; git sends an unforced update only when it found it a
 * fast-forward of that value (it refuses the rest itself, as "non-fast-forward" or "fetch first"),
 * so the walk is not made a second time.
 */
export async function checkUpdate(
  u: Update,
  current: RemoteRef | undefined,
  lease: string | undefined,
  present: (oid: string) => boolean | Promise<boolean>,
  gitDir: string,
  shownToGit = false,
): Promise<Verdict> {
  const cur = current?.record.target;
  if (lease !== undefined) {
    // git sends `<ref>:` (nothing after the colon) when the ref must not exist and it has no
    // remote-tracking ref to name, and the zero id when told so (`--force-with-lease=<ref>:`).
    const expected = lease === ZERO_OID || lease === '' ? undefined : lease;
    if (cur !== expected) return { kind: 'reject', reason: 'stale info' };
    return cur === u.oid ? { kind: 'up-to-date' } : { kind: 'write' };
  }
  if (cur === u.oid) return { kind: 'up-to-date' };
  if (u.oid === undefined || cur === undefined || u.force) return { kind: 'write' };
  if (u.dst.startsWith('refs/tags/')) return { kind: 'reject', reason: 'already exists' };
  if (!(await present(cur))) return { kind: 'reject', reason: 'fetch first' };
  if (shownToGit) return { kind: 'write' };
  try {
    if (await isAncestor(cur, u.oid, { gitDir })) return { kind: 'write' };
  } catch (err) {
    // git refuses objects that are not commits (e.g. a tree pushed to a ref): no fast-forward
    // relation exists. Any other failure surfaces.
    if (!(err instanceof GitError)) throw err;
  }
  return { kind: 'reject', reason: 'non-fast forward' };
}

/**
 * An update decided again after its compare-and-swap met the ref moved by another push, on the
 * value it holds now (`current`), for ref records and ref tables alike. On a listing that was true
 * when git saw it, a force, a delete or a lease was judged against a value that is gone: refused as
 * stale, as git's own receive-pack refuses to move a ref from a value it did not see (done when the
 * ref already is what the push makes it). When git decided on the warm agent's view and the swap
 * showed that view behind the account (`agentBehind`), git's judgement may rest on a value the ref
 * never had just then: judged again as git would have on a true listing, a lease against what git
 * expects, a force or a delete over the ref as it is, a plain update only as a fast-forward of it.
 */
export async function checkAgain(
  u: Update,
  current: RemoteRef | undefined,
  lease: string | undefined,
  agentBehind: boolean,
  present: (oid: string) => boolean | Promise<boolean>,
  gitDir: string,
): Promise<Verdict> {
  if (!agentBehind && (u.force || u.oid === undefined || lease !== undefined))
    return current?.record.target === u.oid
      ? { kind: 'up-to-date' }
      : { kind: 'reject', reason: 'stale info' };
  return checkUpdate(u, current, agentBehind ? lease : undefined, present, gitDir);
}

/**
 * Why a push may not make `update` to `branch` of the repository (its team's protection, read by
 * the caller: ops/ knows no forge records), or undefined when it may: the rule's words and who
 * refuses it, each named as a sentence names them (the owner as `the repository's owner`).
 */
export type ProtectionCheck = (
  branch: string,
  update: 'force' | 'delete',
) => Promise<{ reason: ProtectedReason; who: string[] } | undefined>;

/** Why git's receive-pack would refuse an update before any fast-forward rule, with its words. */
export interface ReceiveRefusal {
  reason: 'failed to update ref' | 'deletion of the current branch prohibited' | ProtectedReason;
  /** One sentence for the user, in git's own terms. */
  sentence: string;
}

/** What {@link receiveRefusal} looks at besides the update. */
export interface ReceiveState {
  /** The pushed object's type. */
  type: string | undefined;
  current: RemoteRef | undefined;
  /** The branch the remote's HEAD names. */
  head: string | undefined;
  /** The refs the remote will hold beside this one (this push's deletes gone, its earlier creates in). */
  names: Set<string>;
  /** Whether the pusher's `receive.denyDeleteCurrent` lets it delete the current branch. */
  deleteCurrent: () => Promise<boolean>;
}

/**
 * The refusals a bare repository's receive-pack makes on its own, so that a push to knotless ends as
 * one to git does: a branch holds commits only (refs.c); a ref cannot be created where it would be
 * a directory of another or inside one (`refs/heads/a` beside `refs/heads/a/b`: no clone could hold
 * both); and the branch HEAD names is not deleted (receive.denyDeleteCurrent, on by default): a
 * clone would check out nothing. There is no server whose config could turn that off, so the
 * pushing repository's `receive.denyDeleteCurrent` does (`ignore`, `warn` or false).
 */
export async function receiveRefusal(u: Update, st: ReceiveState): Promise<ReceiveRefusal | undefined> {
  if (u.oid !== undefined && u.dst.startsWith('refs/heads/') && st.type !== 'commit') {
    return {
      reason: 'failed to update ref',
      sentence: `cannot update ref '${u.dst}': trying to write non-commit object ${u.oid} to branch '${u.dst}'; a branch holds commits only (push it to a tag or another refs/ name).`,
    };
  }
  const clash = u.oid !== undefined && st.current === undefined ? nameConflict(u.dst, st.names) : undefined;
  if (clash !== undefined) {
    return {
      reason: 'failed to update ref',
      sentence: `cannot lock ref '${u.dst}': '${clash}' exists; cannot create '${u.dst}' (git cannot hold a ref and another inside it; delete one first).`,
    };
  }
  if (u.oid === undefined && st.current !== undefined && u.dst === st.head && !(await st.deleteCurrent())) {
    return {
      reason: 'deletion of the current branch prohibited',
      sentence: `refusing to delete the current branch: ${u.dst} is the branch the remote's HEAD names, so a clone would check out nothing; to make another branch the default first, run \`knotless repo default-branch <repo> <branch>\`; to delete it anyway (HEAD then names a missing branch until it is pushed again), push with \`git -c receive.denyDeleteCurrent=ignore push\`.`,
    };
  }
  return undefined;
}

/**
 * Why an update git's rules let through may still not be written: it rewrites (a forced update whose
 * new commit does not contain the branch's current one; `fastForward` false when the current commit
 * is not here to tell) or deletes a branch the repository's protection guards. The protection is
 * asked only then, so a plain push reads nothing more.
 */
export async function protectedRefusal(
  u: Update,
  current: RemoteRef | undefined,
  protection: ProtectionCheck,
  fastForward: (from: string, to: string) => Promise<boolean>,
): Promise<ReceiveRefusal | undefined> {
  const cur = current?.record.target;
  if (cur === undefined || !u.dst.startsWith('refs/heads/')) return undefined;
  const update =
    u.oid === undefined ? 'delete' : u.force && !(await fastForward(cur, u.oid)) ? 'force' : undefined;
  if (update === undefined) return undefined;
  const refused = await protection(u.dst.slice('refs/heads/'.length), update);
  if (refused === undefined) return undefined;
  const allow = `\`knotless repo protect <repo> <branch> --allow-${update === 'delete' ? 'deletion' : 'force-push'}\``;
  // Every record protecting the branch must allow it, so the sentence names each that does not.
  const how =
    refused.who.length === 1
      ? `${refused.who[0]} can allow it with ${allow}`
      : `${refused.who.join(' and ')} each refuse it, and each must allow it with ${allow}`;
  return {
    reason: refused.reason,
    sentence: `${u.dst} is a protected branch and its protection does not allow ${update === 'delete' ? 'deleting it' : 'a force-push'}; nothing was written to it (${how}).`,
  };
}

/** A ref among `names` that `dst` would be a directory of, or be inside of (git's D/F conflict). */
export function nameConflict(dst: string, names: Set<string>): string | undefined {
  const parts = dst.split('/');
  for (let i = 2; i < parts.length; i++) {
    const up = parts.slice(0, i).join('/');
    if (names.has(up)) return up;
  }
  for (const name of names) if (name.startsWith(`${dst}/`)) return name;
  return undefined;
}

/**
 * What receive-pack tells the refs it did not get to when an atomic push fails: a refused ref
 * transaction fails them all ("atomic transaction failed"), a refusal before it the others only
 * ("atomic push failure"); knotless's own refusals (a ref moved under it) say "atomic push failed".
 */
export function atomicFailure(reasons: Array<PushReason | undefined>): PushReason {
  if (reasons.includes('failed to update ref')) return 'atomic transaction failed';
  if (reasons.includes('deletion of the current branch prohibited')) return 'atomic push failure';
  return 'atomic push failed';
}

/** Whether the repository pushed from lets a push delete the remote's current branch (see {@link receiveRefusal}). */
export async function deleteCurrentAllowed(gitDir: string): Promise<boolean> {
  // Exit 1: not set, so git's default (refuse).
  const value = (await gitText(['config', '--get', 'receive.denyDeleteCurrent'], { okCodes: [1], gitDir }))
    .trim()
    .toLowerCase();
  return ['ignore', 'warn', 'false', 'no', 'off', '0'].includes(value);
}
