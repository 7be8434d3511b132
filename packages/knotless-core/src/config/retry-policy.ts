/** How hard to try; from KNOTLESS_RETRIES, KNOTLESS_RETRY_BASE_MS and KNOTLESS_RETRY_MAX_WAIT. */
export interface RetryPolicy {
  /** Retries after the first attempt (0: never retry). */
  retries: number;
  /** The first backoff; each retry doubles it, with full jitter. */
  baseMs: number;
  /** No retry starts later than this after the first attempt did; a longer Retry-After is not waited for. */
  maxWaitMs: number;
}

/** The policy when nothing is configured: 5 attempts, waits from 250 ms, at most 30 s in all. */
export const DEFAULT_RETRY: RetryPolicy = { retries: 4, baseMs: 250, maxWaitMs: 30_000 };
