// A did:plc document is read without @atproto/identity on every command's handle check: what it
// reads must be what the library reads (the same PDS, the same claimed handle) on the real PLC and
// on documents a hostile directory could serve, and a directory that misbehaves proves nothing.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { getHandle, getPds, IdResolver } from '@atproto/identity';
import { readConfig } from 'knotless-core/config/env';
import { atprotoData, BadDidDocument, readPlcDocument } from 'knotless-core/identity/did-doc';
import { fetchOver, transportFor } from 'knotless-core/xrpc/transport';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);
const did = 'did:plc:abcdefghijklmnopqrstuvwx';
const signal = () => AbortSignal.timeout(10_000);

/** What the library makes of a document it accepts: its PDS and claimed handle. */
function library(doc: Parameters<typeof getPds>[0]): {
  pds: string | undefined;
  claimed: string | undefined;
} {
  return { pds: getPds(doc), claimed: getHandle(doc) };
}

describe('a DID document read without the library', () => {
  it('reads the PDS and handle the library reads, on the documents an account can have', () => {
    const pds = {
      id: '#atproto_pds',
      type: 'AtprotoPersonalDataServer',
      serviceEndpoint: 'https://pds.example',
    };
    const docs = [
      { id: did, alsoKnownAs: ['at://alice.example'], service: [pds] },
      {
        id: did,
        alsoKnownAs: ['https://elsewhere', 'at://second.example', 'at://third.example'],
        service: [pds],
      },
      { id: did, service: [{ ...pds, id: `${did}#atproto_pds` }] },
      { id: did, alsoKnownAs: [], service: [{ ...pds, type: 'Something' }] },
      {
        id: did,
        alsoKnownAs: ['at://a.example'],
        service: [{ ...pds, serviceEndpoint: 'javascript:alert(1)' }],
      },
      { id: did, alsoKnownAs: ['at://a.example'], service: [{ ...pds, serviceEndpoint: 'http://' }] },
      { id: did, alsoKnownAs: ['at://a.example'], service: [{ ...pds, id: 'did:plc:other#atproto_pds' }] },
      { id: did, alsoKnownAs: ['at://a.example'], service: [{ ...pds, serviceEndpoint: { map: 'x' } }] },
      { id: did },
    ];
    for (const doc of docs)
      assert.deepEqual(atprotoData(did, doc), library(doc as never), JSON.stringify(doc));
  });

  it('refuses what is not a DID document of that DID, as the library does', () => {
    const bad = [
      null,
      'text',
      [],
      { id: 'did:plc:someoneelse' },
      { alsoKnownAs: ['at://a.example'] },
      { id: did, alsoKnownAs: 'at://a.example' },
      { id: did, alsoKnownAs: [7] },
      { id: did, service: {} },
      { id: did, service: [null] },
      { id: did, service: [{ type: 'AtprotoPersonalDataServer' }] },
    ];
    for (const doc of bad) assert.throws(() => atprotoData(did, doc), BadDidDocument, JSON.stringify(doc));
  });
});

describe('a did:plc document from the PLC directory', () => {
  let hostile: http.Server;
  let hostileUrl = '';
  let answer: (res: http.ServerResponse) => void = (res) => res.end();
  before(async () => {
    await t.ready;
    hostile = http.createServer((_req, res) => answer(res));
    await new Promise<void>((r) => hostile.listen(0, '127.0.0.1', r));
    hostileUrl = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
  });
  after(() => hostile?.close());

  it('is what the library resolves on the real PLC, and an unknown DID is none', async () => {
    const config = readConfig(t.env());
    const transport = transportFor(config);
    const alice = t.dids['alice.test']!;
    const doc = await new IdResolver({ plcUrl: t.net.plcUrl, fetch: fetchOver(transport) }).did.resolve(
      alice,
    );
    assert.ok(doc !== null);
    const ours = await readPlcDocument(transport, t.net.plcUrl, alice, signal());
    assert.deepEqual(ours, library(doc));
    assert.equal(ours?.claimed, 'alice.test');
    assert.equal(
      await readPlcDocument(transport, t.net.plcUrl, 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa', signal()),
      null,
    );
  });

  it('fails, proving nothing, when the directory errs, redirects or sends what is not a document', async () => {
    const transport = transportFor(readConfig(t.env()));
    const cases: Array<[string, (res: http.ServerResponse) => void, RegExp | typeof BadDidDocument]> = [
      ['HTTP 500', (res) => res.writeHead(500).end('{}'), /HTTP 500/],
      ['a redirect', (res) => res.writeHead(302, { location: `${t.net.plcUrl}/${did}` }).end(), /HTTP 302/],
      ['not JSON', (res) => res.writeHead(200).end('<html>'), BadDidDocument],
      [
        'another DID',
        (res) => res.writeHead(200).end(JSON.stringify({ id: 'did:plc:other' })),
        BadDidDocument,
      ],
      [
        'too big',
        (res) => res.writeHead(200).end(`{"id":"${did}","x":"${'a'.repeat(2 * 1024 * 1024)}"}`),
        /./,
      ],
    ];
    for (const [what, serve, expected] of cases) {
      answer = serve;
      await assert.rejects(readPlcDocument(transport, hostileUrl, did, signal()), expected, what);
    }
  });
});
