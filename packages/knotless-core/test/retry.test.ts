import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readConfig } from '../src/config/env.ts';
import { DEFAULT_RETRY, isRetrySafe, nextWait, serverWaitMs } from '../src/xrpc/retry.ts';

const policy = { retries: 4, baseMs: 100, maxWaitMs: 10_000 };
const status = (s: number | undefined, headers: Record<string, string> = {}) => ({ status: s, headers });

describe('retry policy', () => {
  it('repeats only what is safe to send twice', () => {
    assert.equal(isRetrySafe('GET', 'com.atproto.repo.listRecords', undefined), true);
    assert.equal(isRetrySafe('POST', 'com.atproto.repo.uploadBlob', new Uint8Array(3)), true);
    assert.equal(isRetrySafe('POST', 'com.atproto.repo.putRecord', { swapRecord: null }), true);
    assert.equal(isRetrySafe('POST', 'com.atproto.repo.putRecord', { swapRecord: 'bafy' }), true);
    assert.equal(isRetrySafe('POST', 'com.atproto.repo.applyWrites', { swapCommit: 'bafy' }), true);
    assert.equal(isRetrySafe('POST', 'com.atproto.repo.applyWrites', { writes: [] }), false);
    assert.equal(isRetrySafe('POST', 'com.atproto.repo.deleteRecord', { rkey: 'x' }), false);
    assert.equal(isRetrySafe('POST', 'com.atproto.server.refreshSession', undefined), false);
  });

  it('backs off exponentially with full jitter, within the bound', () => {
    assert.equal(
      nextWait(policy, 0, 0, status(503), () => 0.5),
      50,
    );
    assert.equal(
      nextWait(policy, 3, 0, status(503), () => 0.5),
      400,
    );
    assert.equal(
      nextWait(policy, 3, 0, status(503), () => 0),
      0,
    );
    assert.equal(
      nextWait(policy, 4, 0, status(503), () => 0.5),
      undefined,
      'out of retries',
    );
    assert.equal(
      nextWait(policy, 0, 0, status(undefined), () => 1),
      100,
      'no answer at all',
    );
    assert.equal(
      nextWait(policy, 0, 0, status(400), () => 0.5),
      undefined,
      'not transient',
    );
    assert.equal(
      nextWait(policy, 0, 0, status(401), () => 0.5),
      undefined,
    );
    assert.equal(
      nextWait(policy, 2, 9_990, status(502), () => 0.5),
      undefined,
      'over the wait budget',
    );
  });

  it('honours Retry-After (seconds or a date) and the PDS ratelimit-reset', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    assert.equal(serverWaitMs(status(429, { 'retry-after': '2' }), now), 2000);
    assert.equal(serverWaitMs(status(503, { 'retry-after': 'Thu, 01 Jan 2026 00:00:05 GMT' }), now), 5000);
    assert.equal(serverWaitMs(status(429, { 'ratelimit-reset': String(now / 1000 + 3) }), now), 3000);
    assert.equal(serverWaitMs(status(503, { 'ratelimit-reset': String(now / 1000 + 3) }), now), undefined);
    assert.equal(nextWait(policy, 0, 0, status(429, { 'retry-after': '1' })), 1000);
    assert.equal(
      nextWait(policy, 0, 0, status(429, { 'retry-after': '3600' })),
      undefined,
      'too long: fail now',
    );
  });

  it('is configured by KNOTLESS_RETRIES, KNOTLESS_RETRY_BASE_MS and KNOTLESS_RETRY_MAX_WAIT', () => {
    assert.deepEqual(readConfig({}).retry, DEFAULT_RETRY);
    assert.deepEqual(
      readConfig({ KNOTLESS_RETRIES: '0', KNOTLESS_RETRY_BASE_MS: '5', KNOTLESS_RETRY_MAX_WAIT: '2' }).retry,
      { retries: 0, baseMs: 5, maxWaitMs: 2000 },
    );
    assert.deepEqual(readConfig({ KNOTLESS_RETRIES: 'lots' }).retry, DEFAULT_RETRY);
  });
});
