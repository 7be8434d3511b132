/**
 * A PDS's rate limits, read in one place: the `RateLimit-*` headers every rate-limited answer carries
 * (the budget an account has left and when it refills), and the one rule for a 429. The reference PDS
 * (@atproto/xrpc-server's HttpRateLimiter) sends `RateLimit-Limit`, `RateLimit-Remaining`,
 * `RateLimit-Reset` (epoch seconds) and `RateLimit-Policy` (`<limit>;w=<seconds>`) on each answer of a
 * limited method, and `Retry-After` with a 429. It charges an account's writes in points (a create 3,
 * an update 2, a delete 1; 5000 an hour) and refuses a request over budget before its handler runs:
 * a 429 wrote nothing, so sending the request again once the budget refills cannot write twice.
 */

import { serverWaitMs, type Failure } from './retry.ts';

/** What one answer said of a budget. */
export interface RateStatus {
  /** Points the window allows. */
  limit: number;
  /** Points left in the window. */
  remaining: number;
  /** When the window refills, in ms since the epoch. */
  resetAt: number;
  /** The window's length in seconds, when the policy said. */
  windowSeconds: number | undefined;
}

function header(headers: Failure['headers'], name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function count(value: string | undefined): number | undefined {
  if (value === undefined || !/^\s*\d{1,15}\s*$/.test(value)) return undefined;
  return Number(value);
}

/** The budget an answer's `RateLimit-*` headers state; undefined when they are absent or unreadable. */
export function readRateLimit(headers: Failure['headers']): RateStatus | undefined {
  const limit = count(header(headers, 'ratelimit-limit'));
  const remaining = count(header(headers, 'ratelimit-remaining'));
  const reset = count(header(headers, 'ratelimit-reset'));
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined;
  const w = /;\s*w=(\d{1,10})/.exec(header(headers, 'ratelimit-policy') ?? '')?.[1];
  return { limit, remaining, resetAt: reset * 1000, windowSeconds: w === undefined ? undefined : Number(w) };
}

/** Below this share of its window's points, an account's budget is running low. */
export const LOW_BUDGET_SHARE = 0.1;

/**
 * The write budget of each account, as the latest answer to one of its writes stated it: kept by
 * whoever sends writes for many pushes (the warm agent), so that it can spend fewer requests when
 * the budget runs low.
 */
export class RateBudgets {
  readonly #by = new Map<string, RateStatus>();

  /** Takes what an answer to a write of `account` says (nothing when it says nothing). */
  observe(account: string, headers: Failure['headers']): void {
    const status = readRateLimit(headers);
    if (status !== undefined) this.#by.set(account, status);
  }

  /** The account's budget, while its window lasts. */
  status(account: string, now = Date.now()): RateStatus | undefined {
    const s = this.#by.get(account);
    if (s === undefined || s.resetAt <= now) return undefined;
    return s;
  }

  /** True when the account has less than {@link LOW_BUDGET_SHARE} of its window's points left. */
  low(account: string, now = Date.now()): boolean {
    const s = this.status(account, now);
    return s !== undefined && s.remaining < s.limit * LOW_BUDGET_SHARE;
  }
}

/** When a 429 stated no wait at all, or one already over: wait this long, not a busy loop. */
const LEAST_WAIT_MS = 1000;

/**
 * The rule for a 429: how long to wait before sending again, or undefined to fail now. It waits
 * when the PDS said until when (Retry-After or RateLimit-Reset) and that ends within `boundMs` of the
 * first wait (`waitedMs`: rate-limit waits so far for this request); a 429 that says nothing is left
 * to the ordinary retry policy (undefined here too, with `stated` false).
 */
export function rateLimitWait(
  f: Failure,
  waitedMs: number,
  boundMs: number,
  now = Date.now(),
): { stated: boolean; waitMs: number | undefined } {
  if (f.status !== 429) return { stated: false, waitMs: undefined };
  const asked = serverWaitMs(f, now);
  if (asked === undefined) return { stated: false, waitMs: undefined };
  const wait = Math.max(asked, LEAST_WAIT_MS);
  return { stated: true, waitMs: waitedMs + wait <= boundMs ? wait : undefined };
}

/** Whole seconds, rounded up: a wait of 200 ms is "1 s", never "0 s". */
function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** The one line said on stderr before a rate-limit wait. */
export function rateLimitNotice(waitMs: number, method: 'GET' | 'POST'): string {
  const more = method === 'POST' ? 'writes' : 'requests';
  return `knotless: the PDS asks to wait ${seconds(waitMs)} s before more ${more}; waiting`;
}

/**
 * The sentence for a rate limit not waited out: `what` was refused, and when to try again, as a time
 * and in seconds; without a stated wait, only to wait and try again.
 */
export function rateLimitSentence(what: string, f: Failure, now = Date.now()): string {
  const wait = serverWaitMs(f, now);
  if (wait === undefined) return `The PDS is rate-limiting ${what}; wait and try again.`;
  const at = new Date(now + wait).toISOString();
  return `The PDS is rate-limiting ${what} until ${at}; try again then, in ${seconds(wait)} s.`;
}
