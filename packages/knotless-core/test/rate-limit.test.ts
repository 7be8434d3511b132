import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  RateBudgets,
  rateLimitNotice,
  rateLimitSentence,
  rateLimitWait,
  readRateLimit,
} from '../src/xrpc/rate-limit.ts';

const NOW = Date.parse('2026-12-05T18:00:00.000Z');
/** The headers the reference PDS sends: reset in epoch seconds, policy `<limit>;w=<seconds>`. */
const headers = (remaining: number, resetIn: number, extra: Record<string, string> = {}) => ({
  'ratelimit-limit': '5000',
  'ratelimit-remaining': String(remaining),
  'ratelimit-reset': String(NOW / 1000 + resetIn),
  'ratelimit-policy': '5000;w=3600',
  ...extra,
});

describe("a PDS's rate limits", () => {
  it('reads the budget the RateLimit headers state, and nothing from headers that are not numbers', () => {
    assert.deepEqual(readRateLimit(headers(4321, 60)), {
      limit: 5000,
      remaining: 4321,
      resetAt: NOW + 60_000,
      windowSeconds: 3600,
    });
    assert.equal(readRateLimit({}), undefined);
    assert.equal(readRateLimit(headers(1, 60, { 'ratelimit-remaining': '-1' })), undefined);
    assert.equal(readRateLimit(headers(1, 60, { 'ratelimit-reset': 'soon' })), undefined);
  });

  it("keeps each account's budget while its window lasts, and says when it runs low", () => {
    const budgets = new RateBudgets();
    budgets.observe('did:plc:a', headers(4000, 600));
    budgets.observe('did:plc:b', headers(499, 600));
    // An answer without the headers leaves the budget as it was.
    budgets.observe('did:plc:b', {});
    assert.equal(budgets.low('did:plc:a', NOW), false);
    assert.equal(budgets.low('did:plc:b', NOW), true);
    assert.equal(budgets.status('did:plc:b', NOW)?.remaining, 499);
    // Once the window has reset, what it said no longer holds.
    assert.equal(budgets.low('did:plc:b', NOW + 600_000), false);
    assert.equal(budgets.low('did:plc:c', NOW), false);
  });

  it('waits out a 429 whose reset is within the bound, and fails at once on one past it', () => {
    const limited = (after: string) => ({
      status: 429,
      headers: { ...headers(0, 40), 'retry-after': after },
    });
    assert.deepEqual(rateLimitWait(limited('40'), 0, 60_000, NOW), { stated: true, waitMs: 40_000 });
    // The bound holds over all the waits of one request, not each.
    assert.deepEqual(rateLimitWait(limited('40'), 30_000, 60_000, NOW), { stated: true, waitMs: undefined });
    assert.deepEqual(rateLimitWait(limited('3600'), 0, 60_000, NOW), { stated: true, waitMs: undefined });
    // RateLimit-Reset alone says until when too; a reset already past is still a wait, not a busy loop.
    assert.deepEqual(rateLimitWait({ status: 429, headers: headers(0, 20) }, 0, 60_000, NOW), {
      stated: true,
      waitMs: 20_000,
    });
    assert.deepEqual(rateLimitWait({ status: 429, headers: headers(0, -5) }, 0, 60_000, NOW), {
      stated: true,
      waitMs: 1000,
    });
    // A 429 that says nothing, or another status, is not this rule's.
    assert.deepEqual(rateLimitWait({ status: 429, headers: {} }, 0, 60_000, NOW), {
      stated: false,
      waitMs: undefined,
    });
    assert.equal(rateLimitWait({ status: 503, headers: headers(0, 20) }, 0, 60_000, NOW).stated, false);
    // 0: never wait.
    assert.equal(rateLimitWait(limited('1'), 0, 0, NOW).waitMs, undefined);
  });

  it('says a wait in one line, and a refusal with the time and the seconds to wait', () => {
    assert.equal(
      rateLimitNotice(1200, 'POST'),
      'knotless: the PDS asks to wait 2 s before more writes; waiting',
    );
    assert.equal(
      rateLimitNotice(300, 'GET'),
      'knotless: the PDS asks to wait 1 s before more requests; waiting',
    );
    assert.equal(
      rateLimitSentence('writing the refs of a/b', { status: 429, headers: headers(0, 3600) }, NOW),
      'The PDS is rate-limiting writing the refs of a/b until 2026-12-05T19:00:00.000Z; try again then, in 3600 s.',
    );
    assert.equal(
      rateLimitSentence('writing the refs of a/b', { status: 429, headers: {} }, NOW),
      'The PDS is rate-limiting writing the refs of a/b; wait and try again.',
    );
  });
});
