// A seeded sample of the fuzz scripts (scripts/fuzz/*.ts run 100,000 cases each): the same cases on
// every run, so a failure here reproduces with `node scripts/fuzz/<name>.ts --seed <seed>`.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fuzz } from '../../../scripts/fuzz/gen.ts';
import { checkRecords } from '../../../scripts/fuzz/records.ts';
import { checkRefKey } from '../../../scripts/fuzz/ref-key.ts';
import { checkUrl } from '../../../scripts/fuzz/url.ts';

const SEED = 20261130;

describe('fuzzing (seeded sample)', () => {
  it('record and pack decoders refuse bad input with corrupt-remote and keep their invariants', () => {
    assert.deepEqual(fuzz(3000, SEED, checkRecords), []);
  });

  it('ref-name keys round-trip, never collide and stay within record-key rules', () => {
    assert.deepEqual(fuzz(20_000, SEED, checkRefKey), []);
  });

  it('the URL parser accepts only valid owners and names, refuses the rest with invalid-url', () => {
    assert.deepEqual(fuzz(20_000, SEED, checkUrl), []);
  });

  it('finds a broken property (the harness itself can fail)', () => {
    const failures = fuzz(10, SEED, (g) => {
      if (g.int(2) === 0) throw new Error('planted');
    });
    assert.ok(failures.length > 0 && failures.every((f) => f.message === 'planted'));
  });
});
