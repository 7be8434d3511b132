// A ref table read with its proof (format.md, "The ref table", "Verified"), from the dev network's
// real PDS and PLC directory: the honest answer is verified, a proved absence is an absence, and a
// proxy that forges the answer (changed record bytes, another account's commit, the proof stripped)
// or a wrong key or an unreachable DID document is refused with one sentence.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { BlockMap, blocksToCarFile, cborToLex, readCarWithRoot } from '@atproto/repo';
import { isKnotlessError } from 'knotless-core/errors';
import { EXIT_CODES } from 'knotless-core/exit-codes';
import { accountSigningKey, verifiedRead } from 'knotless-core/records/verified-read';
import { transportFor } from 'knotless-core/xrpc/transport';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const transport = transportFor({ caCerts: undefined });
const TABLE = (did: string) => ({
  $type: 'dev.knotless.refs',
  repo: `at://${did}/dev.knotless.repo/project`,
  head: 'refs/heads/main',
  packs: [],
  refs: [{ ref: 'refs/heads/main', target: 'a'.repeat(40), packs: [] }],
  seq: 0,
  updatedAt: new Date().toISOString(),
});

type Mode = 'honest' | 'changed' | 'other-account' | 'stripped' | 'high-s';
let mode: Mode = 'honest';
let proxy: http.Server;
let proxyUrl: string;

async function put(handle: string): Promise<void> {
  const pds = t.net.pdsUrl;
  const session = (await (
    await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: handle, password: t.password }),
    })
  ).json()) as { accessJwt: string };
  const did = t.dids[handle]!;
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.putRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({
      repo: did,
      collection: 'dev.knotless.refs',
      rkey: 'project',
      record: TABLE(did),
      validate: false,
    }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** The PDS's answer to getRecord, tampered with as `mode` says. */
async function answer(url: URL): Promise<Uint8Array> {
  if (mode === 'other-account') url.searchParams.set('did', t.dids['bob.test']!);
  const real = new Uint8Array(
    await (await fetch(new URL(url.pathname + url.search, t.net.pdsUrl))).arrayBuffer(),
  );
  if (mode === 'changed') {
    // Same length, same CIDs: only the record's bytes say another branch.
    const bytes = Buffer.from(real);
    const at = bytes.indexOf('refs/heads/main');
    assert.ok(at > 0);
    bytes.write('refs/heads/mXin', at);
    return bytes;
  }
  if (mode === 'stripped') {
    const car = await readCarWithRoot(real);
    const only = new BlockMap();
    only.set(car.root, car.blocks.get(car.root)!);
    return blocksToCarFile(car.root, only);
  }
  if (mode === 'high-s') {
    // The commit's signature with s replaced by n - s: as valid for secp256k1, but atproto accepts
    // only the low-S form of a signature.
    const car = await readCarWithRoot(real);
    const commit = cborToLex(car.blocks.get(car.root)!) as { sig: Uint8Array };
    const s = BigInt(`0x${Buffer.from(commit.sig.subarray(32)).toString('hex')}`);
    const high = (SECP256K1_N - s).toString(16).padStart(64, '0');
    const blocks = new BlockMap();
    for (const [cid, block] of car.blocks) if (!cid.equals(car.root)) blocks.set(cid, block);
    const root = await blocks.add({
      ...commit,
      sig: Buffer.concat([commit.sig.subarray(0, 32), Buffer.from(high, 'hex')]),
    });
    return blocksToCarFile(root, blocks);
  }
  return real;
}

const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

before(async () => {
  await t.ready;
  await put('alice.test');
  await put('bob.test');
  proxy = http.createServer((req, res) => {
    answer(new URL(req.url!, 'http://proxy')).then(
      (body) => {
        res.writeHead(200, { 'content-type': 'application/vnd.ipld.car' });
        res.end(body);
      },
      (err: unknown) => {
        res.writeHead(500);
        res.end(String(err));
      },
    );
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
});
after(async () => {
  transport.close();
  await new Promise((resolve) => proxy?.close(resolve));
});

async function read(opts: { rkey?: string; key?: string; pds?: string } = {}) {
  const did = t.dids['alice.test']!;
  return verifiedRead({
    transport,
    pds: opts.pds ?? proxyUrl,
    did,
    collection: 'dev.knotless.refs',
    rkey: opts.rkey ?? 'project',
    signingKey: opts.key ?? (await accountSigningKey(transport, did, t.net.plcUrl, 'alice.test/project')),
    name: 'alice.test/project',
  });
}

async function refused(p: Promise<unknown>, words: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isKnotlessError(err, 'unverified-remote'), String(err) + String((err as Error).cause));
    assert.match(err.message, /^The ref table of alice\.test\/project could not be verified \(/);
    assert.match(err.message, words);
    assert.doesNotMatch(err.message, /\n/);
    return true;
  });
}

describe('a verified read of a ref table', () => {
  it('returns the record, its CID and the signed commit it was proved at', async () => {
    mode = 'honest';
    const got = await read();
    assert.equal(got.found, true);
    assert.ok(got.found);
    assert.deepEqual((got.value as { refs: unknown }).refs, TABLE('x').refs);
    assert.match(got.cid, /^bafyrei/);
    assert.match(got.rev, /^[a-z2-7]{13}$/);
    assert.match(got.commit, /^bafyrei/);
  });

  it('proves a record absent', async () => {
    mode = 'honest';
    const got = await read({ rkey: 'nothing-here' });
    assert.equal(got.found, false);
  });

  it('refuses changed record bytes, another account commit, a stripped proof and a high-S signature', async () => {
    mode = 'changed';
    await refused(read(), /blocks match their CIDs/);
    mode = 'other-account';
    await refused(read(), /another account's commit/);
    mode = 'stripped';
    await refused(read(), /lacks the tree's path/);
    mode = 'high-s';
    await refused(read(), /signature does not match/);
    mode = 'honest';
  });

  it("refuses a commit not signed by the account's key, and a DID document it cannot read", async () => {
    mode = 'honest';
    const bobKey = await accountSigningKey(transport, t.dids['bob.test']!, t.net.plcUrl, 'bob.test/project');
    await refused(read({ key: bobKey }), /signature does not match/);
    await assert.rejects(
      accountSigningKey(transport, t.dids['alice.test']!, 'http://127.0.0.1:9', 'alice.test/project'),
      (err: unknown) => {
        assert.ok(isKnotlessError(err, 'unverified-remote'));
        assert.match(err.message, /DID document of alice\.test\/project's account could not be read/);
        return true;
      },
    );
    assert.equal(EXIT_CODES['unverified-remote'], 21);
  });
});
