// Which forwarded requests the agent's group commit may take (agent/group-state.ts parseWrite): only a
// ref write with a swap, under a bearer token whose subject is the account written. Everything else
// must be forwarded as it came, so that its own credentials and conditions reach the PDS untouched.
// And what the group commit's account state keeps after a write sent alone (group-state.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AccountState, parseWrite } from '../src/agent/group-state.ts';
import type { Transport } from 'knotless-core/xrpc/transport';

const DID = 'did:plc:alice';
const PUT = new URL('http://pds.test/xrpc/com.atproto.repo.putRecord');
const DELETE = new URL('http://pds.test/xrpc/com.atproto.repo.deleteRecord');
const COLLECTION = 'dev.knotless.ref';

function bearer(claims: Record<string, unknown>): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `Bearer ${part({ alg: 'ES256K' })}.${part(claims)}.c2lnbmF0dXJl`;
}

const auth = { authorization: bearer({ sub: DID, exp: 2_000_000_000 }), 'content-type': 'application/json' };
const put = (extra: Record<string, unknown> = {}) =>
  Buffer.from(
    JSON.stringify({
      repo: DID,
      collection: COLLECTION,
      rkey: 'site:refs:heads:main',
      record: { ref: 'refs/heads/main' },
      swapRecord: 'bafyold',
      ...extra,
    }),
  );

describe('the writes a group commit takes', () => {
  it('takes a put or a delete with a swap under a bearer token of the account written', () => {
    const op = parseWrite(PUT, auth, put(), COLLECTION);
    assert.deepEqual(
      op && { kind: op.kind, did: op.did, rkey: op.rkey, swap: op.swap, expires: op.expires },
      { kind: 'put', did: DID, rkey: 'site:refs:heads:main', swap: 'bafyold', expires: 2_000_000_000 },
    );
    assert.equal(parseWrite(PUT, auth, put({ swapRecord: null }), COLLECTION)?.swap, null);
    const del = JSON.stringify({ repo: DID, collection: COLLECTION, rkey: 'k', swapRecord: 'bafyold' });
    assert.equal(parseWrite(DELETE, auth, Buffer.from(del), COLLECTION)?.kind, 'delete');
  });

  it('forwards as it came a write whose token is for another account, or is not a bearer token', () => {
    const other = { ...auth, authorization: bearer({ sub: 'did:plc:mallory', exp: 2_000_000_000 }) };
    assert.equal(parseWrite(PUT, other, put(), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, { ...auth, dpop: 'proof' }, put(), COLLECTION), undefined);
    assert.equal(
      parseWrite(PUT, { ...auth, authorization: 'DPoP abc.def.ghi' }, put(), COLLECTION),
      undefined,
    );
    assert.equal(parseWrite(PUT, { 'content-type': 'application/json' }, put(), COLLECTION), undefined);
  });

  it("takes the listing's swapCommit with the write: the commit proves the listing", () => {
    assert.equal(
      parseWrite(PUT, auth, put({ swapCommit: 'bafycommit' }), COLLECTION)?.swapCommit,
      'bafycommit',
    );
    assert.equal(parseWrite(PUT, auth, put(), COLLECTION)?.swapCommit, undefined);
  });

  it('forwards as it came a write without a swap, with conditions of its own, or of another collection', () => {
    const noSwap = JSON.parse(put().toString()) as Record<string, unknown>;
    delete noSwap['swapRecord'];
    assert.equal(parseWrite(PUT, auth, Buffer.from(JSON.stringify(noSwap)), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, put({ swapCommit: 7 }), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, put({ validate: false }), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, put({ collection: 'dev.knotless.repo' }), COLLECTION), undefined);
    const del = JSON.stringify({ repo: DID, collection: COLLECTION, rkey: 'k', swapRecord: null });
    assert.equal(parseWrite(DELETE, auth, Buffer.from(del), COLLECTION), undefined);
    const create = new URL('http://pds.test/xrpc/com.atproto.repo.createRecord');
    assert.equal(parseWrite(create, auth, put(), COLLECTION), undefined);
    assert.equal(parseWrite(PUT, auth, Buffer.from('not json'), COLLECTION), undefined);
  });
});

describe("the group commit's account state after a write sent alone", () => {
  /** A PDS stand-in for the state's reads: the account at commit c1, records a and b; counts reads. */
  function reads(): { transport: Transport; count: () => number } {
    let n = 0;
    const answer = (body: unknown) => ({ status: 200, headers: {}, body: Buffer.from(JSON.stringify(body)) });
    const transport: Transport = {
      request(url) {
        n++;
        const method = url.pathname.split('/').pop();
        if (method === 'com.atproto.sync.getLatestCommit')
          return Promise.resolve(answer({ cid: 'c1', rev: 'r1' }));
        const rkey = url.searchParams.get('rkey')!;
        return Promise.resolve(answer({ cid: `${rkey}-1` }));
      },
      close() {},
    };
    return { transport, count: () => n };
  }

  it('keeps what it knew, plus the write, when the write was swapped on its commit', async () => {
    const { transport, count } = reads();
    const state = new AccountState(transport, 'http://pds.test/xrpc', DID, COLLECTION);
    await state.current(['a', 'b']);
    assert.equal(count(), 3);
    state.landedAlone('c1', 'a', 'a-2', 'c2', 'r2');
    const known = await state.current(['a', 'b']);
    assert.equal(count(), 3, 'nothing read again');
    assert.deepEqual([known.commit, known.cids.get('a'), known.cids.get('b')], ['c2', 'a-2', 'b-1']);
    assert.equal(state.ownSince('r2'), 'r1');
    // A delete sent alone, the same way.
    state.landedAlone('c2', 'b', null, 'c3', 'r3');
    assert.equal((await state.current(['b'])).cids.get('b'), null);
    assert.equal(state.ownSince('r3'), 'r1');
  });

  it('forgets everything when the write was swapped on another commit, or on none', async () => {
    for (const swapCommit of ['c0', undefined]) {
      const { transport, count } = reads();
      const state = new AccountState(transport, 'http://pds.test/xrpc', DID, COLLECTION);
      await state.current(['a']);
      state.landedAlone(swapCommit, 'a', 'a-2', 'c2', 'r2');
      assert.equal(state.commit, undefined);
      assert.equal(state.ownSince('r2'), undefined);
      await state.current(['a']);
      assert.equal(count(), 4, 'read again');
    }
  });
});
