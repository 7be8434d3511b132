import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import {
  FORGE_COLLECTIONS,
  FORGE_KINDS,
  FORGE_LEXICONS,
  forgeRow,
  kindOf,
} from '../src/forge/kinds/table.ts';
import { KNOTLESS_OAUTH_SCOPE } from '../src/forge/oauth-scope.ts';

const lexicons = path.join(import.meta.dirname, '../../../lexicons');

describe("the table of the forge's kinds", () => {
  it('names each kind, collection and table once, each collection with its lexicon document, in the backfill order', () => {
    for (const key of ['name', 'collection', 'table'] as const)
      assert.equal(new Set(FORGE_KINDS.map((k) => k[key])).size, FORGE_KINDS.length, key);
    for (const c of FORGE_COLLECTIONS) {
      assert.equal(kindOf(c).collection, c);
      // The document a kind carries is its collection's file in lexicons/, as it is there.
      const file = path.join(lexicons, `${c.split('.').join('/')}.json`);
      assert.deepEqual(kindOf(c).lexicon, JSON.parse(fs.readFileSync(file, 'utf8')), c);
      assert.equal(kindOf(c).lexicon.id, c);
    }
    assert.deepEqual(
      FORGE_LEXICONS.map((l) => l.id),
      FORGE_COLLECTIONS,
    );
    // Pull requests and issues before the records that name them.
    assert.deepEqual(FORGE_COLLECTIONS, [
      'dev.knotless.pull',
      'dev.knotless.pull.status',
      'dev.knotless.issue',
      'dev.knotless.issue.state',
      'dev.knotless.comment',
      'dev.knotless.star',
      'dev.knotless.check',
      'dev.knotless.protection',
    ]);
  });

  it("makes a record's row: the columns every forge row has, then its kind's", () => {
    const row = forgeRow(
      { did: 'did:plc:a', rkey: '3k', cid: 'bafy', rev: 'r1', time: '2026-01-01T00:00:00.000Z' },
      {
        collection: 'dev.knotless.star',
        record: { subject: 'at://did:plc:b/dev.knotless.repo/site', createdAt: '2025-12-31T23:00:00+01:00' },
      },
    );
    assert.deepEqual(row, {
      did: 'did:plc:a',
      rkey: '3k',
      cid: 'bafy',
      rev: 'r1',
      deleted: 0,
      created_at: '2025-12-31T22:00:00.000Z',
      indexed_at: '2026-01-01T00:00:00.000Z',
      subject_did: 'did:plc:b',
      subject_name: 'site',
    });
  });

  it("asks an OAuth sign-in for the git side and the kinds a sign-in writes, not a runner's checks nor protections", () => {
    const scope = KNOTLESS_OAUTH_SCOPE.split(' ');
    assert.equal(new Set(scope).size, scope.length);
    assert.deepEqual(
      [...scope].sort(),
      [
        'atproto',
        'blob:application/x-git-packed-objects',
        ...[
          'repo',
          'ref',
          'refs',
          'refs.part',
          'lfs',
          'pull',
          'pull.status',
          'issue',
          'issue.state',
          'comment',
          'key',
          'star',
        ].map((c) => `repo:dev.knotless.${c}`),
      ].sort(),
    );
  });
});
