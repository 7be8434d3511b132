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
] as const;

/** A stable identifier for one kind of failure. */
export type ErrorCode = (typeof ErrorCodes)[number];

/** A failure the user can understand and act on. */
export class KnotlessError extends Error {
  override name = 'KnotlessError';
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/** True when `err` is a KnotlessError, optionally of the given code. */
export function isKnotlessError(err: unknown, code?: ErrorCode): err is KnotlessError {
  return err instanceof KnotlessError && (code === undefined || err.code === code);
}
