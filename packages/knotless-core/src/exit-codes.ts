import type { ErrorCode } from './errors.ts';

/**
 * The exit status for each kind of failure, decided here and nowhere else. Grouped so scripts can
 * branch on them; documented in docs/reference/cli.md.
 */
export const EXIT_CODES: Record<ErrorCode, number> = {
  usage: 2,
  'invalid-name': 2,
  'invalid-url': 2,
  'unknown-handle': 3,
  'not-logged-in': 4,
  'wrong-password': 4,
  'session-expired': 4,
  'login-failed': 4,
  'scope-missing': 5,
  'permission-denied': 5,
  'repo-exists': 6,
  'repo-missing': 7,
  'pds-unreachable': 8,
  'pds-error': 9,
  'rate-limited': 10,
  'dev-network': 11,
  'corrupt-remote': 12,
  'push-rejected': 13,
  'too-large': 14,
  'remote-changed': 15,
  'merge-conflict': 16,
  'not-found': 17,
  'account-inactive': 18,
  'no-key': 19,
  'checks-unmet': 20,
  'unverified-remote': 21,
  cancelled: 130,
};

/** Exit status of a failure that is a bug in knotless rather than something the user did. */
export const EXIT_INTERNAL = 70;
