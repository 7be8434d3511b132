import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  RateBudgets,
  UploadBudgets,
  UploadBudgetWatch,
  rateLimitNotice,
  rateLimitSentence,
  rateLimitWait,
  readRateLimit,
  parseUploadStatus,
  readUploadStatus,
  uploadBudgetNotice,
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
    assert.deepEqual(readRateLimit(headers(4321, 60), NOW), {
      limit: 5000,
      remaining: 4321,
      resetAt: NOW + 60_000,
      windowSeconds: 3600,
    });
    assert.equal(readRateLimit({}), undefined);
    assert.equal(readRateLimit(headers(1, 60, { 'ratelimit-remaining': '-1' })), undefined);
    assert.equal(readRateLimit(headers(1, 60, { 'ratelimit-reset': 'soon' })), undefined);
    // A reset no clock can show (the agent logs it as a time) is no budget at all.
    assert.equal(readRateLimit(headers(1, 60, { 'ratelimit-reset': '99999999999999' }), NOW), undefined);
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
    // A wait no clock can show is not believed: the sentence says to wait, not a time that throws.
    for (const lie of [{ 'ratelimit-reset': '99999999999999999999' }, { 'retry-after': '1e300' }])
      assert.equal(
        rateLimitSentence('writing the refs of a/b', { status: 429, headers: lie }, NOW),
        'The PDS is rate-limiting writing the refs of a/b; wait and try again.',
      );
    assert.deepEqual(rateLimitWait({ status: 429, headers: { 'retry-after': '1e300' } }, 0, 60_000, NOW), {
      stated: false,
      waitMs: undefined,
    });
  });
});

describe("a PDS's budget for blob uploads", () => {
  /** The headers the reference PDS sends on an upload's answer: 1,000 a day. */
  const upload = (remaining: number, resetIn: number, extra: Record<string, string | undefined> = {}) => {
    const all: Record<string, string | undefined> = {
      'ratelimit-limit': '1000',
      'ratelimit-remaining': String(remaining),
      'ratelimit-reset': String(NOW / 1000 + resetIn),
      'ratelimit-policy': '1000;w=86400',
      ...extra,
    };
    return Object.fromEntries(Object.entries(all).filter(([, v]) => v !== undefined)) as Record<
      string,
      string
    >;
  };

  it('reads what is left, the limit, the window and the reset, each as digits within bounds', () => {
    assert.deepEqual(readUploadStatus(upload(20, 600), NOW), {
      remaining: 20,
      limit: 1000,
      resetAt: NOW + 600_000,
      windowSeconds: 86400,
    });
    // Remaining alone is enough; the limit may come from the policy alone.
    assert.deepEqual(readUploadStatus({ 'ratelimit-remaining': '7' }, NOW), {
      remaining: 7,
      limit: undefined,
      resetAt: undefined,
      windowSeconds: undefined,
    });
    assert.equal(readUploadStatus(upload(7, 60, { 'ratelimit-limit': undefined }), NOW)?.limit, 1000);
    // Lies state nothing: negative, text, a fraction, more digits than any budget, more left than
    // the limit, a reset past or further off than any window, a policy that is not one.
    for (const lie of [
      { 'ratelimit-remaining': '-5' },
      { 'ratelimit-remaining': 'lots' },
      { 'ratelimit-remaining': '2.5' },
      { 'ratelimit-remaining': '99999999999999999999' },
      { 'ratelimit-remaining': '1001' },
      { 'ratelimit-limit': 'many' },
      { 'ratelimit-reset': String(NOW / 1000 - 1) },
      { 'ratelimit-reset': '99999999999999' },
      { 'ratelimit-reset': String(NOW / 1000 + 3 * 86400) },
      { 'ratelimit-reset': 'tomorrow' },
      { 'ratelimit-policy': 'w=1000' },
      { 'ratelimit-policy': '1000;w=0' },
    ])
      assert.equal(readUploadStatus(upload(20, 600, lie), NOW), undefined, JSON.stringify(lie));
  });

  it('keeps the tighter of what uploads and reads said, per PDS, and not what writes or sign-ins said', () => {
    const budgets = new UploadBudgets();
    const pds = 'https://pds.example';
    budgets.observe(pds, 'POST', 'com.atproto.server.createSession', 200, upload(2, 300), NOW);
    budgets.observe(pds, 'POST', 'com.atproto.repo.putRecord', 200, upload(3, 300), NOW);
    budgets.observe(pds, 'GET', 'com.atproto.sync.getRepo', 200, upload(4, 300), NOW);
    assert.equal(budgets.status(pds, NOW), undefined);
    budgets.observe(pds, 'GET', 'com.atproto.repo.getRecord', 200, upload(900, 300), NOW);
    assert.equal(budgets.status(pds, NOW)?.remaining, 900);
    budgets.observe(pds, 'POST', 'com.atproto.repo.uploadBlob', 200, upload(40, 600), NOW);
    budgets.observe(pds, 'GET', 'com.atproto.repo.getRecord', 200, upload(899, 300), NOW);
    assert.equal(budgets.status(pds, NOW)?.remaining, 40);
    // A refusal has its own wait and sentence: what it says of the budget is not taken here.
    budgets.observe(pds, 'POST', 'com.atproto.repo.uploadBlob', 429, upload(0, 600), NOW);
    assert.equal(budgets.status(pds, NOW)?.remaining, 40);
    // An answer without the headers, or with lies, leaves what was said.
    budgets.observe(pds, 'POST', 'com.atproto.repo.uploadBlob', 200, {}, NOW);
    budgets.observe(pds, 'POST', 'com.atproto.repo.uploadBlob', 200, upload(-1, 600), NOW);
    assert.equal(budgets.status(pds, NOW)?.remaining, 40);
    assert.equal(budgets.status('https://other.example', NOW), undefined);
    // Once a window has refilled, what it said no longer holds.
    assert.equal(budgets.status(pds, NOW + 300_000)?.remaining, 40);
    assert.equal(budgets.status(pds, NOW + 600_000), undefined);
  });

  it("takes the agent's figure only whole, within bounds and with its reset, and keeps the tightest", () => {
    const budgets = new UploadBudgets();
    const pds = 'https://pds.example';
    const kept = { remaining: 6, limit: 1000, resetAt: NOW + 60_000, windowSeconds: 86400 };
    assert.deepEqual(parseUploadStatus(kept, NOW), kept);
    for (const lie of [
      null,
      'six',
      { ...kept, remaining: -1 },
      { ...kept, remaining: 1.5 },
      { ...kept, remaining: '6' },
      { ...kept, remaining: 2000 },
      { ...kept, resetAt: NOW - 1 },
      { ...kept, resetAt: 1e20 },
      { ...kept, windowSeconds: 0 },
    ])
      assert.equal(parseUploadStatus(lie, NOW), undefined, JSON.stringify(lie));
    // Without a reset, nobody can tell whether it still holds: not taken.
    budgets.keep(pds, { remaining: 1 }, NOW);
    assert.equal(budgets.status(pds, NOW), undefined);
    budgets.keep(pds, { ...kept, remaining: 'lots' }, NOW);
    assert.equal(budgets.status(pds, NOW), undefined);
    budgets.keep(pds, kept, NOW);
    assert.equal(budgets.status(pds, NOW)?.remaining, 6);
    // This command's own answers count too: the tightest holds.
    budgets.observe(pds, 'GET', 'com.atproto.repo.getRecord', 200, upload(3, 300), NOW);
    assert.equal(budgets.status(pds, NOW)?.remaining, 3);
    assert.equal(budgets.status('https://other.example', NOW), undefined);
  });

  it('says once, in one line, what an upload needs, what is left and until when; nothing when enough is left', () => {
    const status = readUploadStatus(upload(20, 3300), NOW);
    assert.equal(
      uploadBudgetNotice('614400 bytes of packs', 150, status, NOW),
      'knotless: uploading 614400 bytes of packs needs 150 blob uploads, more than the 20 the PDS says are left (of 1000 per day) until 2026-12-05 18:55:00 UTC (in 55 min); going on: if the PDS refuses, it waits (within KNOTLESS_RATE_LIMIT_WAIT) or stops saying when to retry.',
    );
    assert.equal(
      uploadBudgetNotice(
        'LFS object 0123456789ab',
        3,
        readUploadStatus({ 'ratelimit-remaining': '2' }, NOW),
        NOW,
      ),
      'knotless: uploading LFS object 0123456789ab needs 3 blob uploads, more than the 2 the PDS says are left; going on: if the PDS refuses, it waits (within KNOTLESS_RATE_LIMIT_WAIT) or stops saying when to retry.',
    );
    assert.equal(uploadBudgetNotice('x', 20, status, NOW), undefined);
    assert.equal(uploadBudgetNotice('x', 150, undefined, NOW), undefined);
    const said: string[] = [];
    let now = readUploadStatus(upload(500, 60), NOW);
    const watch = new UploadBudgetWatch(
      'x',
      () => now,
      (line) => said.push(line),
    );
    watch.check(150);
    assert.deepEqual(said, []);
    now = readUploadStatus(upload(5, 60), NOW);
    watch.check(149);
    watch.check(148);
    assert.equal(said.length, 1);
    assert.match(said[0]!, /needs 149 blob uploads, more than the 5 /);
  });
});
