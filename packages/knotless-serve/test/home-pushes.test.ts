// The home page's push rows: ref updates close together are one push, and each ref is shown once
// in it, at its newest commit (two pushes of main within a minute showed main twice).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { PushRow } from '../src/db/index-store.ts';
import { groupPushes, pushRow } from '../src/web/pages/home.ts';

const row = (ref: string, target: string, second: number, rev: string): PushRow => ({
  did: 'did:plc:alice',
  handle: 'alice.test',
  rkey: `site~${ref}`,
  rev,
  repo: 'site',
  ref,
  old_target: null,
  new_target: target.repeat(40),
  time: new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString(),
  seq: null,
});

describe('home page push rows', () => {
  it('show each ref of a push once, at its newest commit', () => {
    // Newest first, as the index gives them: main pushed twice within a minute, and a tag.
    const groups = groupPushes([
      row('refs/heads/main', 'c', 30, '3rev3'),
      row('refs/tags/v1', 'b', 20, '3rev2'),
      row('refs/heads/main', 'a', 10, '3rev1'),
    ]);
    assert.equal(groups.length, 1);
    const text = pushRow(groups[0]!).toString();
    assert.equal(text.match(/<span class="pill">main<\/span>/g)?.length, 1, text);
    assert.match(text, /cccccccc/);
    assert.doesNotMatch(text, /aaaaaaaa/);
    assert.match(text, /<span class="pill">v1<\/span>/);
    assert.doesNotMatch(text, /more refs/);
  });
});
