/**
 * A PDS's rate limits, read in one place: the `RateLimit-*` headers every rate-limited answer carries
 * (the budget an account has left and when it refills), and the one rule for a 429. The reference PDS
 * (@atproto/xrpc-server's HttpRateLimiter) sends `RateLimit-Limit`, `RateLimit-Remaining`,
 * `RateLimit-Reset` (epoch seconds) and `RateLimit-Policy` (`<limit>;w=<seconds>`) on each answer of a
 * limited method, and `Retry-After` with a 429. It charges an account's writes in points (a create 3,
 * an update 2, a delete 1; 5000 an hour) and refuses a request over budget before its handler runs:
 * a 429 wrote nothing, so sending the request again once the budget refills cannot write twice.
 */

import { LONGEST_STATED_WAIT_MS, serverWaitMs, type Failure } from './retry.ts';

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

/**
 * The budget an answer's `RateLimit-*` headers state; undefined when they are absent or unreadable,
 * or name a reset further off than any window lasts (no time to log).
 */
export function readRateLimit(headers: Failure['headers'], now = Date.now()): RateStatus | undefined {
  const limit = count(header(headers, 'ratelimit-limit'));
  const remaining = count(header(headers, 'ratelimit-remaining'));
  const reset = count(header(headers, 'ratelimit-reset'));
  if (limit === undefined || remaining === undefined || reset === undefined) return undefined;
  if (reset * 1000 - now > LONGEST_STATED_WAIT_MS) return undefined;
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

/** What one answer said of the budget that blob uploads spend at its PDS. */
export interface UploadStatus {
  /** Requests left in the window. */
  remaining: number;
  /** Requests the window allows, when the answer said (`RateLimit-Limit`, or the policy's). */
  limit: number | undefined;
  /** When the window refills, in ms since the epoch, when the answer said. */
  resetAt: number | undefined;
  /** The window's length in seconds, when the policy said. */
  windowSeconds: number | undefined;
}

/**
 * The budget an answer's `RateLimit-*` headers state, for counting blob uploads against it: only
 * `RateLimit-Remaining` is needed. Every figure is parsed as digits and bounded, and an answer that
 * contradicts itself (more left than its limit, a reset already past or more than a week off, a
 * header that is not a number) states nothing: a figure is said to the user only when it holds up.
 */
export function readUploadStatus(headers: Failure['headers'], now = Date.now()): UploadStatus | undefined {
  const remaining = count(header(headers, 'ratelimit-remaining'));
  if (remaining === undefined) return undefined;
  const said = (name: string) => header(headers, name) !== undefined;
  const stated = count(header(headers, 'ratelimit-limit'));
  if (said('ratelimit-limit') && stated === undefined) return undefined;
  const policy = header(headers, 'ratelimit-policy');
  const p = policy === undefined ? undefined : /^\s*(\d{1,15})\s*;\s*w=(\d{1,10})\s*(?:;|$)/.exec(policy);
  if (policy !== undefined && p === null) return undefined;
  const limit = stated ?? (p?.[1] === undefined ? undefined : Number(p[1]));
  const windowSeconds = p?.[2] === undefined ? undefined : Number(p[2]);
  let resetAt: number | undefined;
  if (said('ratelimit-reset')) {
    const reset = count(header(headers, 'ratelimit-reset'));
    if (reset === undefined) return undefined;
    resetAt = reset * 1000;
    if (windowSeconds !== undefined && resetAt - now > windowSeconds * 1000 + 60_000) return undefined;
  }
  return holdsUp({ remaining, limit, resetAt, windowSeconds }, now);
}

/**
 * `status` when it does not contradict itself: no more left than its limit, a window that lasts, a
 * reset still to come (else it already refilled and what it said no longer holds) and within
 * {@link LONGEST_STATED_WAIT_MS}. The one check for headers and for a figure handed over alike.
 */
function holdsUp(status: UploadStatus, now: number): UploadStatus | undefined {
  const { remaining, limit, resetAt, windowSeconds } = status;
  if (limit !== undefined && remaining > limit) return undefined;
  if (windowSeconds === 0) return undefined;
  if (resetAt !== undefined && (resetAt <= now || resetAt - now > LONGEST_STATED_WAIT_MS)) return undefined;
  return status;
}

/**
 * A figure handed over by another process (the warm agent's answer to a view), checked as the
 * headers are: whole numbers within bounds, no more left than the limit, a reset still to come
 * within {@link LONGEST_STATED_WAIT_MS}. Undefined for anything else.
 */
export function parseUploadStatus(value: unknown, now = Date.now()): UploadStatus | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const whole = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;
  const maybe = (n: unknown): n is number | undefined => n === undefined || whole(n);
  const { remaining, limit, resetAt, windowSeconds } = v;
  if (!whole(remaining) || !maybe(limit) || !maybe(resetAt) || !maybe(windowSeconds)) return undefined;
  return holdsUp({ remaining, limit, resetAt, windowSeconds }, now);
}

/** The reference PDS limits this read on its own, apart from the budget every request spends. */
const OWN_LIMIT_READS = new Set(['com.atproto.sync.getRepo']);

/**
 * What the answers of one command said of each PDS's budget for blob uploads. The reference PDS
 * counts an upload against its own limit (1,000 a day from one address) and against the one every
 * request spends (3,000 in five minutes), and an answer carries the tighter of the limits that apply
 * to it: an upload's answer states both, a read's the second. Writes and sign-ins are limited
 * otherwise (write points, sessions), so their answers say nothing of uploads and are not read; nor
 * is a refusal (429), whose wait or sentence is its own (see rateLimitWait).
 */
export class UploadBudgets {
  readonly #by = new Map<string, { upload?: UploadStatus; read?: UploadStatus; kept?: UploadStatus }>();

  /** Takes what an answer (`status`) of `service` to `method` `nsid` says, if it speaks of uploads. */
  observe(
    service: string,
    method: string,
    nsid: string,
    status: number,
    headers: Failure['headers'],
    now = Date.now(),
  ): void {
    if (status === 429) return;
    const kind =
      nsid === 'com.atproto.repo.uploadBlob'
        ? 'upload'
        : method === 'GET' && !OWN_LIMIT_READS.has(nsid)
          ? 'read'
          : undefined;
    if (kind === undefined) return;
    const stated = readUploadStatus(headers, now);
    if (stated === undefined) return;
    const at = this.#by.get(service) ?? {};
    at[kind] = stated;
    this.#by.set(service, at);
  }

  /**
   * Takes a figure the warm agent kept from the answers it carried for `service` (a push through it
   * may send no read before its uploads): only one with its reset, since until then what is left can
   * only go down, and none that does not hold up ({@link parseUploadStatus}).
   */
  keep(service: string, value: unknown, now = Date.now()): void {
    const status = parseUploadStatus(value, now);
    if (status?.resetAt === undefined) return;
    const at = this.#by.get(service) ?? {};
    at.kept = status;
    this.#by.set(service, at);
  }

  /** The tightest of what uploads, reads and the agent last said of `service`, while its window lasts. */
  status(service: string, now = Date.now()): UploadStatus | undefined {
    const at = this.#by.get(service);
    const live = [at?.upload, at?.read, at?.kept].filter(
      (s): s is UploadStatus => s !== undefined && (s.resetAt === undefined || s.resetAt > now),
    );
    return live.reduce<UploadStatus | undefined>(
      (low, s) => (low === undefined || s.remaining < low.remaining ? s : low),
      undefined,
    );
  }
}

/** A length of time as a user reads it: "45 s", "12 min", "3 h". */
function readableSpan(ms: number): string {
  const s = seconds(ms);
  if (s < 120) return `${s} s`;
  if (s < 120 * 60) return `${Math.ceil(s / 60)} min`;
  return `${Math.ceil(s / 3600)} h`;
}

/** A window's length: "per day", "per 5 minutes", "per 90 s". */
function perWindow(windowSeconds: number): string {
  for (const [unit, size] of [
    ['day', 86400],
    ['hour', 3600],
    ['minute', 60],
  ] as const) {
    if (windowSeconds % size !== 0) continue;
    const n = windowSeconds / size;
    return n === 1 ? `per ${unit}` : `per ${n} ${unit}s`;
  }
  return `per ${windowSeconds} s`;
}

/**
 * The one line said when `needed` blob uploads (uploading `what`: "12345 bytes of packs", "LFS object …")
 * are more than the PDS says are left: what it needs, what is left and until when, as a time of day
 * in UTC and how far off. Undefined when the PDS said nothing, or enough is left.
 */
export function uploadBudgetNotice(
  what: string,
  needed: number,
  status: UploadStatus | undefined,
  now = Date.now(),
): string | undefined {
  if (status === undefined || needed <= status.remaining) return undefined;
  const of =
    status.limit === undefined
      ? ''
      : ` (of ${status.limit}${status.windowSeconds === undefined ? '' : ` ${perWindow(status.windowSeconds)}`})`;
  const until =
    status.resetAt === undefined
      ? ''
      : ` until ${new Date(status.resetAt).toISOString().slice(0, 19).replace('T', ' ')} UTC (in ${readableSpan(status.resetAt - now)})`;
  return `knotless: uploading ${what} needs ${needed} blob uploads, more than the ${status.remaining} the PDS says are left${of}${until}; going on: if the PDS refuses, it waits (within KNOTLESS_RATE_LIMIT_WAIT) or stops saying when to retry.`;
}

/**
 * Says {@link uploadBudgetNotice} at most once for one upload, checked before it starts and again as
 * each blob's answer comes back (an upload's answer may state a tighter budget than the reads before
 * it): `status` is what this command's answers said so far.
 */
export class UploadBudgetWatch {
  #said = false;
  readonly #what: string;
  readonly #status: () => UploadStatus | undefined;
  readonly #say: (line: string) => void;

  constructor(what: string, status: () => UploadStatus | undefined, say: (line: string) => void) {
    this.#what = what;
    this.#status = status;
    this.#say = say;
  }

  /** Whether the line was said. */
  get said(): boolean {
    return this.#said;
  }

  /** Says the line when the `needed` uploads still to send are more than is left. */
  check(needed: number): void {
    if (this.#said) return;
    const line = uploadBudgetNotice(this.#what, needed, this.#status());
    if (line === undefined) return;
    this.#said = true;
    this.#say(line);
  }
}
