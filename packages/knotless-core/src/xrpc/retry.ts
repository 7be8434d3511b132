/**
 * When and how long to retry a request the PDS failed. Only requests that are safe to send twice are
 * retried: queries (GET), blob uploads (content-addressed: a second upload stores the same blob), and
 * writes carrying compare-and-swap (`swapRecord`, `swapCommit`), whose second copy fails cleanly
 * with a swap conflict when the first one landed. Everything else fails at the first fault.
 */

import type { RetryPolicy } from '../config/retry-policy.ts';

// The policy's shape and defaults live with the configuration that reads them (config/ is below xrpc/).
export { DEFAULT_RETRY, type RetryPolicy } from '../config/retry-policy.ts';

/** The HTTP statuses that mean "try again": rate limits and server or gateway faults. */
const TRANSIENT_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

/** What one failed attempt looked like, as far as retrying is concerned. */
export interface Failure {
  /** HTTP status; undefined when no answer came (connection refused, reset, timed out, cut). */
  status: number | undefined;
  headers: Record<string, string | string[] | undefined>;
}

/** True when sending this request twice cannot do harm (see the module comment). */
export function isRetrySafe(method: string, nsid: string, body: unknown): boolean {
  if (method === 'GET') return true;
  if (nsid === 'com.atproto.repo.uploadBlob') return true;
  if (typeof body !== 'object' || body === null || body instanceof Uint8Array) return false;
  // swapRecord: null (create only if absent) is compare-and-swap too; only a missing key is not.
  return 'swapRecord' in body || typeof (body as { swapCommit?: unknown }).swapCommit === 'string';
}

/** True when the failure may pass by itself. */
export function isTransient(f: Failure): boolean {
  return f.status === undefined || TRANSIENT_STATUS.has(f.status);
}

function header(f: Failure, name: string): string | undefined {
  const v = f.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * The longest wait or window a server's headers are believed to state: the longest window a PDS is
 * known to use is a day (the reference PDS's blob uploads and writes), so a week leaves room, and a
 * figure past it is a lie (or a fault) that would otherwise name a time no clock can show.
 */
export const LONGEST_STATED_WAIT_MS = 7 * 24 * 3600 * 1000;

/**
 * How long the server asked us to wait, in ms: `Retry-After` (seconds or an HTTP date), else the
 * `ratelimit-reset` the atproto PDS sends with a 429 (epoch seconds). Undefined when it did not say,
 * or said a wait longer than {@link LONGEST_STATED_WAIT_MS}.
 */
export function serverWaitMs(f: Failure, now = Date.now()): number | undefined {
  const wait = statedWaitMs(f, now);
  return wait !== undefined && wait <= LONGEST_STATED_WAIT_MS ? wait : undefined;
}

function statedWaitMs(f: Failure, now: number): number | undefined {
  const after = header(f, 'retry-after');
  if (after !== undefined && after.trim() !== '') {
    const seconds = Number(after);
    if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
    const date = Date.parse(after);
    if (Number.isFinite(date)) return Math.max(0, date - now);
  }
  const reset = Number(header(f, 'ratelimit-reset'));
  if (f.status === 429 && Number.isFinite(reset) && reset > 0) return Math.max(0, reset * 1000 - now);
  return undefined;
}

/**
 * The wait before retry number `attempt` (0-based), or undefined when the request should fail now:
 * out of retries, or the wait would end past the budget (`waitedMs`: time since the first attempt).
 * Backoff is exponential with full jitter, so many clients hitting one PDS spread out.
 */
export function nextWait(
  policy: RetryPolicy,
  attempt: number,
  waitedMs: number,
  f: Failure,
  random: () => number = Math.random,
): number | undefined {
  if (attempt >= policy.retries || !isTransient(f)) return undefined;
  const budget = policy.maxWaitMs - waitedMs;
  const asked = serverWaitMs(f);
  if (asked !== undefined) return asked <= budget ? asked : undefined;
  const wait = Math.round(random() * policy.baseMs * 2 ** attempt);
  return wait <= budget ? wait : undefined;
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
