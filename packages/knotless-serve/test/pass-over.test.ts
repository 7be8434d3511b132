// The stream's first filter: which frames are passed over before any decoding.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MessageFrame } from '@atproto/xrpc-server';
import { passOver } from '../src/ingest/stream.ts';

const frame = (type: string, body: Record<string, unknown>): Uint8Array =>
  new MessageFrame(body as never, { type }).toBytes();

describe('passing over frames', () => {
  it('passes over a commit of other collections only', () => {
    const ops = [{ action: 'create', path: 'app.bsky.feed.like/3k1', cid: null }];
    assert.equal(passOver(frame('#commit', { seq: 1, repo: 'did:plc:a', ops })), true);
  });

  it('reads a commit with a knotless operation among others', () => {
    const ops = [
      { action: 'create', path: 'app.bsky.feed.like/3k1', cid: null },
      { action: 'update', path: 'dev.knotless.ref/site~refs~heads~main', cid: null },
    ];
    assert.equal(passOver(frame('#commit', { seq: 2, repo: 'did:plc:a', ops })), false);
  });

  it('reads every frame that is not a commit: identity, account, sync, info, errors', () => {
    for (const type of ['#identity', '#account', '#sync', '#info'])
      assert.equal(passOver(frame(type, { seq: 3, did: 'did:plc:a', name: 'OutdatedCursor' })), false);
    const error = new Uint8Array([
      0xa1, 0x62, 0x6f, 0x70, 0x20, 0xa1, 0x65, 0x65, 0x72, 0x72, 0x6f, 0x72, 0x61, 0x78,
    ]);
    assert.equal(passOver(error), false);
  });

  it('reads a commit whose record merely mentions the prefix (and finds nothing of ours later)', () => {
    const ops = [{ action: 'create', path: 'app.bsky.feed.post/3k1', cid: null }];
    const blocks = new TextEncoder().encode('a post about dev.knotless.repo');
    assert.equal(passOver(frame('#commit', { seq: 4, repo: 'did:plc:a', ops, blocks })), false);
  });
});
