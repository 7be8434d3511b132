// A proof signed by the key an account had before its current one (after a move, the new PDS serves
// the commit the old PDS signed until the account writes again) is taken only when the commit was
// made before that key was replaced, as the PLC directory's audit log says; a commit the old key
// signed later, or a log that names no earlier key, is refused. The proofs are @atproto/repo's; the
// PDS and the PLC directory are small HTTP servers on loopback serving them.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Secp256k1Keypair } from '@atproto/crypto';
import { TID } from '@atproto/common-web';
import { MemoryBlockstore, Repo, WriteOpAction, concatBytesAsync, getRecords } from '@atproto/repo';
import { isKnotlessError } from '../src/errors.ts';
import { previousSigningKey } from '../src/identity/plc-log.ts';
import { tidMicros } from '../src/tid.ts';
import { verifiedRead } from '../src/records/verified-read.ts';
import { transportFor } from '../src/xrpc/transport.ts';

const DID = 'did:plc:previouspreviouspreviou';
const transport = transportFor({ caCerts: undefined });

let server: http.Server;
let base: string;
let car: Uint8Array;
let oldKey: string;
let newKey: string;
/** What the stand-in PLC directory answers for the audit log. */
let auditLog: unknown;

before(async () => {
  const old = await Secp256k1Keypair.create();
  oldKey = old.did();
  newKey = (await Secp256k1Keypair.create()).did();
  const storage = new MemoryBlockstore();
  const repo = await Repo.create(storage, DID, old, [
    {
      action: WriteOpAction.Create,
      collection: 'dev.knotless.ref',
      rkey: 'r1',
      record: { $type: 'dev.knotless.ref', ref: 'refs/heads/main', target: 'a'.repeat(40) },
    },
  ]);
  car = await concatBytesAsync(
    getRecords(storage, repo.cid, [{ collection: 'dev.knotless.refs', rkey: 'x' }]),
  );
  server = http.createServer((req, res) => {
    if (req.url?.startsWith('/xrpc/com.atproto.sync.getRecord')) {
      res.writeHead(200, { 'content-type': 'application/vnd.ipld.car' });
      return res.end(car);
    }
    if (decodeURIComponent(req.url ?? '') === `/${DID}/log/audit`) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(auditLog));
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => {
  server.close();
  transport.close();
});

const op = (key: string, createdAt: string, nullified = false) => ({
  did: DID,
  cid: 'bafy',
  nullified,
  createdAt,
  operation: { type: 'plc_operation', verificationMethods: { atproto: key } },
});
const hourAgo = () => new Date(Date.now() - 3600_000).toISOString();
const inAMinute = () => new Date(Date.now() + 60_000).toISOString();
const longAgo = new Date(Date.now() - 86_400_000).toISOString();

const read = (previous: boolean) =>
  verifiedRead({
    transport,
    pds: base,
    did: DID,
    collection: 'dev.knotless.refs',
    rkey: 'x',
    signingKey: newKey,
    name: 'alice.test/project',
    ...(previous
      ? {
          previousKey: () => previousSigningKey(transport, base, DID, newKey, AbortSignal.timeout(10_000)),
        }
      : {}),
  });

const refused = (err: unknown) => isKnotlessError(err, 'unverified-remote');

describe("a proof signed by the account's previous key", () => {
  it('reads the time of a TID as @atproto/common-web does', () => {
    for (let i = 0; i < 5; i++) {
      const tid = TID.nextStr();
      assert.equal(tidMicros(tid), TID.fromStr(tid).timestamp());
    }
    assert.equal(tidMicros('not-a-tid'), undefined);
  });

  it('is taken when the commit was made before the old key was replaced', async () => {
    auditLog = [op(oldKey, longAgo), op(newKey, inAMinute())];
    const got = await read(true);
    assert.equal(got.found, false);
  });

  it('is refused without the previous key, when the commit was made after the replacement, and when the log names no earlier key', async () => {
    auditLog = [op(oldKey, longAgo), op(newKey, inAMinute())];
    await assert.rejects(read(false), refused);
    // The old key replaced an hour ago: a commit it signed now is not the account's.
    auditLog = [op(oldKey, longAgo), op(newKey, hourAgo())];
    await assert.rejects(read(true), refused);
    // The old key's operation was nullified: it never was the account's key.
    auditLog = [op(oldKey, longAgo, true), op(newKey, inAMinute())];
    await assert.rejects(read(true), refused);
    // Only the current key in the log.
    auditLog = [op(newKey, longAgo)];
    await assert.rejects(read(true), refused);
    // A log that is not the directory's shape refuses the proof, saying the earlier keys were unread.
    auditLog = { not: 'a list' };
    await assert.rejects(
      read(true),
      (err) => refused(err) && /earlier keys could not be read/.test(String(err)),
    );
  });
});
