import assert from 'node:assert/strict';

/**
 * `pds`'s answer to com.atproto.sync.getRecord of `did`'s ref table `rkey`, as a reader fetches it:
 * the CAR of a proof that it is there or that it is not. Tests replay it, or serve it for another
 * account's, to see what the readers make of it.
 */
export async function refTableProof(pds: string, did: string, rkey: string): Promise<Uint8Array> {
  const url = new URL('/xrpc/com.atproto.sync.getRecord', pds);
  url.searchParams.set('did', did);
  url.searchParams.set('collection', 'dev.knotless.refs');
  url.searchParams.set('rkey', rkey);
  const res = await fetch(url);
  assert.equal(res.status, 200);
  return new Uint8Array(await res.arrayBuffer());
}
