// The agent's views take the stream's changes only when newer than what they hold: a ref as listed
// counts as of the revision the listing was read at, so an older commit the stream delivers late
// (a slow stream, a relay's backlog) never undoes what the listing already had.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import { Views } from '../src/agent/views.ts';

const did = 'did:plc:aliceaaaaaaaaaaaaaaaaaaa';
const key = 'repo~main';
const ref = (target: string, rev?: string): RemoteRef => ({
  key,
  cid: `cid-${target}`,
  record: { repo: 'repo', ref: 'refs/heads/main', target, packs: [], updatedAt: '2026-12-01T00:00:00Z' },
  ...(rev === undefined ? {} : { rev }),
});
const main = (views: Views) => views.get(did, 'repo')?.refs.get(key)?.record.target;

describe("the agent's views", () => {
  it('keep a listed ref against an older change the stream delivers after the listing', () => {
    const views = new Views();
    const view = views.begin(did, 'repo', 'https://pds.example');
    views.finish(view, [ref('c2')], '3lbbbbbbbbbb2');
    views.apply(did, key, ref('c1', '3lbbbbbbbbbb1'), '3lbbbbbbbbbb1');
    assert.equal(main(views), 'c2');
    views.apply(did, key, null, '3lbbbbbbbbbb1');
    assert.equal(main(views), 'c2', 'an older delete');
    views.apply(did, key, ref('c3', '3lbbbbbbbbbb3'), '3lbbbbbbbbbb3');
    assert.equal(main(views), 'c3');
  });

  it('apply what the stream delivered during the listing only where it is newer than the listing', () => {
    const views = new Views();
    const view = views.begin(did, 'repo', 'https://pds.example');
    views.apply(did, key, ref('c1', '3lbbbbbbbbbb1'), '3lbbbbbbbbbb1');
    views.finish(view, [ref('c2')], '3lbbbbbbbbbb2');
    assert.equal(main(views), 'c2');
    const next = views.begin(did, 'repo', 'https://pds.example');
    views.apply(did, key, ref('c3', '3lbbbbbbbbbb3'), '3lbbbbbbbbbb3');
    views.finish(next, [ref('c2')], '3lbbbbbbbbbb2');
    assert.equal(main(views), 'c3');
  });
});
