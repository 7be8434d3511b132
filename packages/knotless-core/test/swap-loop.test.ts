import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { swapLoop, type SwapPlan } from '../src/ops/swap-loop.ts';
import { BlobMissing, KeyRefused, SwapConflict } from '../src/records/remote-repo.ts';

/**
 * The loop alone, against an in-process record with a CID that a write must name (a unit double: the
 * real PDS is exercised through it by repo-commit, compact, helper-refs, stale-view and the faults).
 */
class FakeRecord {
  cid = 1;
  value = 0;
  writes = 0;
  /** Writers that land between our read and our write, one per write of ours. */
  others: number[] = [];
  /** Failures the next writes throw before comparing (BlobMissing and the like). */
  failures: Error[] = [];

  read() {
    return { cid: this.cid, value: this.value };
  }

  swap(expectCid: number, value: number): number {
    this.writes++;
    const failure = this.failures.shift();
    if (failure !== undefined) throw failure;
    const other = this.others.shift();
    if (other !== undefined) {
      this.value = other;
      this.cid++;
    }
    if (expectCid !== this.cid) throw new SwapConflict('record changed');
    this.value = value;
    return ++this.cid;
  }
}

type Read = { cid: number; value: number };

/** Adds one to the value; refuses to move past `limit` ("non-fast forward" stands for any reason). */
function increment(rec: FakeRecord, extra: Partial<SwapPlan<Read, Read, number, string>> = {}) {
  return swapLoop<Read, Read, number, string>({
    start: rec.read(),
    maxAttempts: 5,
    decide: (r) =>
      Promise.resolve(
        r.value >= 100 ? { kind: 'refuse', why: 'non-fast forward' } : { kind: 'write', write: r },
      ),
    write: (r) => Promise.resolve(rec.swap(r.cid, r.value + 1)),
    reread: () => Promise.resolve({ kind: 'again', state: rec.read() }),
    ...extra,
  });
}

describe('swap loop', () => {
  it('re-reads after a conflict and decides again from the new value', async () => {
    const rec = new FakeRecord();
    rec.others = [10];
    const out = await increment(rec);
    assert.deepEqual(out, { kind: 'done', value: 3, conflicted: true });
    assert.equal(rec.value, 11, 'built on the value the other writer left, not on the one first read');
    assert.equal(rec.writes, 2);
  });

  it('returns a refusal as data, without writing', async () => {
    const rec = new FakeRecord();
    rec.others = [100];
    const out = await increment(rec);
    assert.deepEqual(out, { kind: 'refused', why: 'non-fast forward', conflicted: true });
    assert.equal(rec.value, 100);
    assert.equal(rec.writes, 1);
  });

  it('stops after maxAttempts writes when every one conflicts', async () => {
    const rec = new FakeRecord();
    rec.others = [1, 2, 3, 4, 5, 6, 7];
    const out = await increment(rec);
    assert.deepEqual(out, { kind: 'exhausted', cause: 'conflict', conflicted: true });
    assert.equal(rec.writes, 5);
  });

  it('lets the re-read settle the loop even after the last attempt (a write that had landed)', async () => {
    const rec = new FakeRecord();
    rec.others = [1, 2, 3, 4, 5];
    let rereads = 0;
    const out = await increment(rec, {
      reread: () =>
        Promise.resolve(++rereads === 5 ? { kind: 'done', value: 42 } : { kind: 'again', state: rec.read() }),
    });
    assert.deepEqual(out, { kind: 'done', value: 42, conflicted: true });
  });

  it('on BlobMissing re-lists and rebuilds once, then gives up', async () => {
    const rec = new FakeRecord();
    rec.failures = [new BlobMissing('gone')];
    let relists = 0;
    const relist = () => {
      relists++;
      return Promise.resolve(rec.read());
    };
    assert.deepEqual(await increment(rec, { relist }), { kind: 'done', value: 2, conflicted: false });
    assert.equal(relists, 1);

    const again = new FakeRecord();
    again.failures = [new BlobMissing('gone'), new BlobMissing('gone again')];
    relists = 0;
    const out = await increment(again, { relist });
    assert.equal(out.kind, 'exhausted');
    assert.ok(out.kind === 'exhausted' && out.cause === 'blob-missing' && out.last instanceof BlobMissing);
    assert.equal(relists, 1);
    assert.equal(again.writes, 2);
  });

  it('leaves BlobMissing to a caller that does not re-list, and other errors to recover or rethrow', async () => {
    const missing = new FakeRecord();
    missing.failures = [new BlobMissing('gone')];
    await assert.rejects(increment(missing), BlobMissing);

    const refused = new FakeRecord();
    refused.failures = [new KeyRefused('bad key')];
    const recovered = await increment(refused, {
      recover: (err, r) => (err instanceof KeyRefused ? r : undefined),
    });
    assert.deepEqual(recovered, { kind: 'done', value: 2, conflicted: false });

    const other = new FakeRecord();
    other.failures = [new Error('boom')];
    await assert.rejects(increment(other, { recover: () => undefined }), /boom/);
  });

  it('caps decisions that ask to be free of the attempt count', async () => {
    let decisions = 0;
    const out = await swapLoop<null, null, number, string>({
      start: null,
      maxAttempts: 3,
      decide: () => {
        decisions++;
        return Promise.resolve({ kind: 'again', state: null, free: true });
      },
      write: () => Promise.resolve(0),
      reread: () => Promise.resolve({ kind: 'again', state: null }),
    });
    assert.equal(out.kind, 'exhausted');
    assert.equal(decisions, 6, 'three counted attempts and three free ones');
  });
});
