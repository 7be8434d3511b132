// The index's reading of stars and of comments on a line: what it keeps, and what it skips whole.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidRecord, parseAtUri } from 'knotless-core/forge/records';
import type { ForgeCollection } from 'knotless-core/forge/kinds/table';
import { forgeRecords } from '../src/model/forge-records.ts';

const forgeRecordOf = (collection: ForgeCollection, value: unknown) => forgeRecords.any(collection, value);

const now = '2026-01-01T00:00:00.000Z';
const repo = 'at://did:plc:alice/dev.knotless.repo/site';
const pull = 'at://did:plc:bob/dev.knotless.pull/3kabcdefghij2';
const issue = 'at://did:plc:bob/dev.knotless.issue/3kabcdefghij2';

describe('stars and line comments as the index reads them', () => {
  it('keeps a star on a repository record, and skips a star on anything else', async () => {
    const star = await forgeRecordOf('dev.knotless.star', {
      $type: 'dev.knotless.star',
      subject: repo,
      createdAt: now,
    });
    assert.ok(star.collection === 'dev.knotless.star');
    assert.deepEqual(star.record, { subject: repo, createdAt: now });
    assert.deepEqual(parseAtUri(star.record.subject), {
      did: 'did:plc:alice',
      collection: 'dev.knotless.repo',
      rkey: 'site',
    });
    const $type = 'dev.knotless.star';
    for (const subject of [pull, 'https://example.com', 'at://did:plc:alice/dev.knotless.repo/site.git'])
      await assert.rejects(forgeRecordOf($type, { $type, subject, createdAt: now }), InvalidRecord);
    await assert.rejects(forgeRecordOf($type, { $type, subject: repo }), InvalidRecord);
  });

  it('keeps a comment on a line of a round, and skips a line without its round, pair or pull request', async () => {
    const $type = 'dev.knotless.comment';
    const line = { $type, subject: pull, round: 1, path: 'src/a.ts', line: 7, body: 'x', createdAt: now };
    const c = await forgeRecordOf('dev.knotless.comment', line);
    assert.ok(c.collection === 'dev.knotless.comment');
    assert.deepEqual([c.record.round, c.record.path, c.record.line], [1, 'src/a.ts', 7]);
    for (const bad of [
      { ...line, round: undefined },
      { ...line, line: undefined },
      { ...line, path: undefined },
      { ...line, subject: issue },
      { ...line, line: 0 },
      { ...line, path: '' },
      { ...line, path: 'a\u001b]8;;evil\u0007' },
    ])
      await assert.rejects(forgeRecordOf('dev.knotless.comment', bad), InvalidRecord, JSON.stringify(bad));
    // A comment on no line is as before.
    const plain = await forgeRecordOf($type, { $type, subject: issue, body: 'x', createdAt: now });
    assert.ok(plain.collection === 'dev.knotless.comment');
    assert.deepEqual(
      [plain.record.round, plain.record.path, plain.record.line],
      [undefined, undefined, undefined],
    );
  });
});
