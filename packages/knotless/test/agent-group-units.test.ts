// Which forwarded requests the agent's group commit may take (agent/group-state.ts parseWrite): only a
// ref write with a swap, under a bearer token whose subject is the account written. Everything else
// must be forwarded as it came, so that its own credentials and conditions reach the PDS untouched.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseWrite } from '../src/agent/group-state.ts';

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
