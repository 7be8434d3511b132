/**
 * The one error type a user sees. Each has a stable `code` (scripts and tests match on it; exit codes
 * are chosen from it in exit-codes.ts) and a message that is one sentence: what happened and what
 * to do about it.
 */
export const ErrorCodes = [
  'usage',
  'invalid-name',
  'invalid-url',
  'unknown-handle',
  'pds-unreachable',
  'pds-error',
  'rate-limited',
  'wrong-password',
  'not-logged-in',
  'session-expired',
  'login-failed',
  'scope-missing',
  'permission-denied',
  'repo-exists',
  'repo-missing',
  'cancelled',
  'dev-network',
  'corrupt-remote',
  'push-rejected',
  'too-large',
  'remote-changed',
  'merge-conflict',
  'not-found',
  'account-inactive',
  'no-key',
  'checks-unmet',
  'unverified-remote',
] as const;

/** A stable identifier for one kind of failure. */
export type ErrorCode = (typeof ErrorCodes)[number];

/**
 * git's own words for a ref a push refused. git's transport compares a helper's reason with these to
 * print its hints ("fetch first" tells the user to pull, "stale info" that a lease failed), so they
 * are spelled exactly as git's receive-pack spells them.
 */
export type GitReason =
  | 'fetch first'
  | 'non-fast forward'
  | 'stale info'
  | 'already exists'
  | 'atomic push failed'
  // receive-pack's own refusals (a non-commit on a branch or a ref inside another; deleting the branch
  // HEAD names) and what it tells the other refs of an atomic push then
  | 'failed to update ref'
  | 'deletion of the current branch prohibited'
  | 'atomic transaction failed'
  | 'atomic push failure';

/** knotless's own few words for a ref it could not update (git prints them in brackets after the ref). */
export type OwnReason =
  | 'usage error'
  | 'invalid name'
  | 'invalid url'
  | 'unknown handle'
  | 'pds unreachable'
  | 'untrusted certificate'
  | 'pds timed out'
  | 'pds answer unreadable'
  | 'pds error'
  | 'rate limited'
  | 'wrong password'
  | 'not logged in'
  | 'session expired'
  | 'permission denied'
  | 'repository exists'
  | 'repository missing'
  | 'cancelled'
  | 'dev network failed'
  | 'corrupt remote'
  | 'push rejected'
  | 'too large'
  | 'remote changed'
  | 'merge conflict'
  | 'not found'
  | 'no key'
  | 'unverified remote'
  | 'login failed'
  | 'scope missing'
  | 'account not active'
  | 'required checks not passed'
  | ProtectedReason
  | 'git failed'
  | 'sha-256 repository'
  | 'no such object'
  | 'several records claim this ref'
  | 'the name holds characters that act on a terminal'
  | 'a pack it builds on was removed'
  | 'the ref kept changing; try again'
  | 'the account kept changing; try again'
  | 'atomic push exceeds 200 refs'
  | "a maintainer's refs could not be read";

/** Why a push may not rewrite or delete a protected branch, as git prints it after the ref. */
export type ProtectedReason =
  'protected branch: force-push not allowed' | 'protected branch: deletion not allowed';

/** The short reason git prints for a ref that failed: a fixed phrase, never text cut from a message. */
export type PushReason = GitReason | OwnReason;

/** The reason a ref failed with, for each kind of error (an error may name a narrower one). */
const REASONS: Record<ErrorCode, OwnReason> = {
  usage: 'usage error',
  'invalid-name': 'invalid name',
  'invalid-url': 'invalid url',
  'unknown-handle': 'unknown handle',
  'pds-unreachable': 'pds unreachable',
  'pds-error': 'pds error',
  'rate-limited': 'rate limited',
  'wrong-password': 'wrong password',
  'not-logged-in': 'not logged in',
  'session-expired': 'session expired',
  'permission-denied': 'permission denied',
  'repo-exists': 'repository exists',
  'repo-missing': 'repository missing',
  cancelled: 'cancelled',
  'dev-network': 'dev network failed',
  'corrupt-remote': 'corrupt remote',
  'push-rejected': 'push rejected',
  'too-large': 'too large',
  'remote-changed': 'remote changed',
  'merge-conflict': 'merge conflict',
  'not-found': 'not found',
  'no-key': 'no key',
  'checks-unmet': 'required checks not passed',
  'unverified-remote': 'unverified remote',
  'login-failed': 'login failed',
  'scope-missing': 'scope missing',
  'account-inactive': 'account not active',
};

/** A failure the user can understand and act on. */
export class KnotlessError extends Error {
  override name = 'KnotlessError';
  readonly code: ErrorCode;
  /**
   * What git is told of each ref this failure stopped: data, so that nothing re-reads the sentence
   * (whose words are for people and may change) to find it.
   */
  readonly reason: PushReason;
  /**
   * The request was sent and no answer said what became of it (a time-out, a cut connection): a
   * write may have landed. A write's loop reads the record back before reporting it (ops/swap-loop.ts).
   */
  readonly unsure: boolean;
  /** The request was not carried out through the warm agent, which went away: it may go again directly. */
  readonly agentGone: boolean;

  constructor(
    code: ErrorCode,
    message: string,
    options?: { cause?: unknown; reason?: PushReason; unsure?: boolean; agentGone?: boolean },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.reason = options?.reason ?? REASONS[code];
    this.unsure = options?.unsure === true;
    this.agentGone = options?.agentGone === true;
  }
}

/** True when `err` is a KnotlessError, optionally of the given code. */
export function isKnotlessError(err: unknown, code?: ErrorCode): err is KnotlessError {
  return err instanceof KnotlessError && (code === undefined || err.code === code);
}
