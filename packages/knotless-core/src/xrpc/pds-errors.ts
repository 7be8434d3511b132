// What a PDS's refusal means, decided in one place from its XRPC `error` name and HTTP status: the
// names are the protocol's (lexicons declare them), the messages are prose for people and may change.

/** The kinds of refusal knotless acts on; `other` is quoted to the user as the PDS said it. */
export type PdsRefusal =
  /** A compare-and-swap (swapRecord or swapCommit) found the record or the account changed. */
  | 'swap-conflict'
  /** The record asked for does not exist. */
  | 'record-missing'
  /** A blob read, or a blob a written record lists, is not stored. */
  | 'blob-missing'
  /** Something else is not there (a PDS that answers a plain 404). */
  | 'not-found'
  /** The PDS will not take this record key. */
  | 'key-refused'
  /** The credentials themselves were refused (expired or unknown token): renewing them may help. */
  | 'token-rejected'
  /** The caller may not do this (not logged in, or another account's repository). */
  | 'not-permitted'
  | 'rate-limited'
  | 'too-large'
  /**
   * The account is not (or no longer) served here: deactivated, taken down, deleted, or moved to
   * another PDS. Its DID document says which: resolving it again is the next step.
   */
  | 'account-gone'
  /** The PDS failed (HTTP 5xx): it may be down. */
  | 'server-fault'
  | 'other';

/** The part of an XRPC error answer the table reads (XrpcError has it; tests use plain objects). */
export interface XrpcAnswer {
  status: number;
  /** The body's `error` name (`HTTP<status>` when the body named none). */
  error: string;
  message: string;
}

/**
 * Names the reference PDS (@atproto/pds with @atproto/xrpc-server) sends, each checked in its code:
 * - InvalidSwap (400): putRecord, deleteRecord, createRecord and applyWrites on a record or commit swap.
 * - RecordNotFound (400): getRecord of a missing record.
 * - BlobNotFound (400): a write whose record lists a blob the account does not hold
 *   (verifyBlobAndMakePermanent: "Could not find blob: <cid>").
 * - ExpiredToken, InvalidToken (400): an expired, malformed or unverifiable access token.
 * - AuthMissing (401): no credentials; AuthenticationRequired (401): a write to another account's
 *   repository (the `repo` is not the session's DID), or credentials of the wrong kind.
 * - PayloadTooLarge (413): a body over the server's limit; RateLimitExceeded (429).
 * - RepoDeactivated, RepoTakendown, RepoNotFound (400): sync reads (getBlob, getRepo, describeRepo)
 *   of an account that is not active here (api/com/atproto/sync/util.ts); AccountDeactivated and
 *   AccountTakedown (401/400): the credentials of such an account.
 * Forbidden (403) and NotFound (404) are the generic names for those statuses.
 */
const BY_NAME: Record<string, PdsRefusal> = {
  InvalidSwap: 'swap-conflict',
  RecordNotFound: 'record-missing',
  BlobNotFound: 'blob-missing',
  NotFound: 'not-found',
  ExpiredToken: 'token-rejected',
  InvalidToken: 'token-rejected',
  AuthMissing: 'not-permitted',
  AuthenticationRequired: 'not-permitted',
  Forbidden: 'not-permitted',
  RateLimitExceeded: 'rate-limited',
  PayloadTooLarge: 'too-large',
  RepoDeactivated: 'account-gone',
  RepoTakendown: 'account-gone',
  RepoNotFound: 'account-gone',
  AccountDeactivated: 'account-gone',
  AccountTakedown: 'account-gone',
};

/** For a name the table does not know: what its status alone says. */
const BY_STATUS: Record<number, PdsRefusal> = {
  401: 'token-rejected',
  403: 'not-permitted',
  404: 'not-found',
  413: 'too-large',
  429: 'rate-limited',
};

/**
 * Refusals the reference PDS sends only under the generic name InvalidRequest, told apart by the
 * start of their message, which is all it gives; each match is anchored and as narrow as its text:
 * - sync.getBlob of a blob it does not hold: exactly "Blob not found" (api/com/atproto/sync/getBlob
 *   and actor-store/blob/reader; its lexicon declares BlobNotFound, which it does not send).
 * - a record key it refuses: "Unacceptable slur in record key" or "Invalid record key: <key>"
 *   (repo/prepare.ts, whose InvalidRecordError putRecord and applyWrites re-throw as InvalidRequest).
 * - repo.listRecords and repo.getRecord of an account it does not serve as active (deactivated,
 *   taken down, deleted, moved away): "Could not find repo: <did>".
 */
const INVALID_REQUEST: Array<[RegExp, PdsRefusal]> = [
  [/^Could not find repo: /, 'account-gone'],
  [/^Blob not found$/, 'blob-missing'],
  [/^(Unacceptable slur in record key$|Invalid record key[: ])/, 'key-refused'],
];

/** What a PDS's error answer means. */
export function pdsRefusal(err: XrpcAnswer): PdsRefusal {
  const named = Object.hasOwn(BY_NAME, err.error) ? BY_NAME[err.error] : undefined;
  if (named !== undefined) return named;
  if (err.error === 'InvalidRequest') {
    const found = INVALID_REQUEST.find(([re]) => re.test(err.message));
    if (found !== undefined) return found[1];
  }
  if (err.status >= 500) return 'server-fault';
  return BY_STATUS[err.status] ?? 'other';
}

/**
 * The scope an OAuth token lacked, when that is what a 403 says. The reference PDS throws
 * @atproto/oauth-scopes' ScopeMissingError, which reaches the wire under the generic 403 name with
 * the message `Missing required scope "<scope>"` as its only trace; the match is anchored and takes
 * the scope from between the quotes, nothing else.
 */
export function missingScope(err: XrpcAnswer): string | undefined {
  if (err.status !== 403) return undefined;
  return /^Missing required scope "([^"\n]{1,300})"$/.exec(err.message)?.[1];
}

/** True when the server refused the credentials themselves, so that renewing them may help. */
export function isAuthRejection(err: XrpcAnswer): boolean {
  return err.status === 401 || pdsRefusal(err) === 'token-rejected';
}
