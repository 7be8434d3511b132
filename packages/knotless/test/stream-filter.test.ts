import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ErrorFrame, MessageFrame } from '@atproto/xrpc-server';
import { mayConcern } from '../src/agent/frame-filter.ts';

// Frames as the reference PDS's own encoder (@atproto/xrpc-server) makes them.
const alice = 'did:plc:aliceaaaaaaaaaaaaaaaaaaa';
const bob = 'did:plc:bobbbbbbbbbbbbbbbbbbbbbb';
const commit = (repo: string): Uint8Array =>
  new MessageFrame(
    {
      seq: 7,
      repo,
      rev: '3lbcdefghijk2',
      blocks: new Uint8Array(600),
      ops: [],
      time: '2026-01-01T00:00:00Z',
    },
    { type: '#commit' },
  ).toBytes();

describe("the event stream's early filter", () => {
  it("drops another account's commit, sync, identity and account messages before decoding", () => {
    assert.equal(mayConcern(commit(bob), [alice]), false);
    for (const type of ['#sync', '#identity', '#account'])
      assert.equal(
        mayConcern(new MessageFrame({ seq: 8, did: bob }, { type }).toBytes(), [alice]),
        false,
        type,
      );
    // Following nobody: nothing about any account is decoded.
    assert.equal(mayConcern(commit(bob), []), false);
  });

  it('keeps every message about a followed account, and everything it cannot place', () => {
    assert.equal(mayConcern(commit(alice), [bob, alice]), true);
    assert.equal(
      mayConcern(new MessageFrame({ seq: 8, did: alice }, { type: '#identity' }).toBytes(), [alice]),
      true,
    );
    // Error frames, #info and unknown types end or affect every view: always decoded.
    assert.equal(mayConcern(new ErrorFrame({ error: 'ConsumerTooSlow' }).toBytes(), [alice]), true);
    assert.equal(
      mayConcern(new MessageFrame({ name: 'OutdatedCursor' }, { type: '#info' }).toBytes(), []),
      true,
    );
    assert.equal(mayConcern(new MessageFrame({ seq: 9, did: bob }, { type: '#labels' }).toBytes(), []), true);
    // A followed DID that only occurs inside another account's frame: a decode, never a miss.
    const mentions = new MessageFrame(
      { seq: 10, repo: bob, blocks: new TextEncoder().encode(`a record naming ${alice}`), ops: [] },
      { type: '#commit' },
    ).toBytes();
    assert.equal(mayConcern(mentions, [alice]), true);
  });
});
