// refRecordOf skips only what the parser refuses as invalid; any other failure surfaces.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { refRecordOf } from '../src/model/records.ts';

const valid = {
  repo: 'r',
  ref: 'refs/heads/main',
  target: 'a'.repeat(40),
  packs: [
    { id: 'b'.repeat(40), size: 32, count: 0, inline: { $bytes: Buffer.alloc(32).toString('base64') } },
  ],
  updatedAt: '2026-01-01T00:00:00.000Z',
};

describe('refRecordOf', () => {
  it('reads a valid record', () => {
    assert.equal(refRecordOf(valid)?.target, 'a'.repeat(40));
  });

  it('skips a record the parser refuses (undefined, as the helper skips it)', () => {
    assert.equal(refRecordOf({ ...valid, target: 'not an id' }), undefined);
    assert.equal(refRecordOf(null), undefined);
  });

  it('lets a failure that is not a refusal surface instead of skipping the record', () => {
    const broken = {
      ...valid,
      get packs(): unknown {
        throw new TypeError('a fault of ours');
      },
    };
    assert.throws(() => refRecordOf(broken), { name: 'TypeError', message: 'a fault of ours' });
  });
});
