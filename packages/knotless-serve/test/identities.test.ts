// A handle is unverified when its PDS gives no answer or no JSON, and the appview log says why;
// Identities no longer turns every failure into "not verified" silently. The PLC directory and the
// PDS are one small local HTTP server here: what is tested is how Identities reads their answers.

import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it, mock } from 'node:test';
import { Index } from '../src/db/index-store.ts';
import { openDatabase } from '../src/db/open.ts';
import { Identities } from '../src/ingest/identities.ts';

const GOOD = 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa';
const GARBLED = 'did:plc:bbbbbbbbbbbbbbbbbbbbbbbb';
const GONE = 'did:plc:cccccccccccccccccccccccc';
const FLAKY = 'did:plc:dddddddddddddddddddddddd';

describe('handle verification in dev mode', () => {
  let server: http.Server;
  let flakyDown = true;
  let flakyAsked = 0;
  let index: Index;
  let identities: Identities;
  const lines: string[] = [];

  before(async () => {
    // A port with nothing listening: the PDS of the account whose PDS is gone.
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const gonePort = (closed.address() as AddressInfo).port;
    await new Promise<void>((r) => closed.close(() => r()));

    server = http.createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const here = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const docs: Record<string, { handle: string; pds: string }> = {
        [GOOD]: { handle: 'good.test', pds: here },
        [GARBLED]: { handle: 'garbled.test', pds: here },
        [GONE]: { handle: 'gone.test', pds: `http://127.0.0.1:${gonePort}` },
        [FLAKY]: { handle: 'flaky.test', pds: here },
      };
      if (url.pathname === '/xrpc/com.atproto.identity.resolveHandle') {
        const handle = url.searchParams.get('handle');
        if (handle === 'good.test') return res.end(JSON.stringify({ did: GOOD }));
        if (handle === 'flaky.test') {
          flakyAsked++;
          return flakyDown ? res.writeHead(503).end() : res.end(JSON.stringify({ did: FLAKY }));
        }
        return res.end('<html>not json</html>');
      }
      const did = decodeURIComponent(url.pathname.slice(1));
      const entry = docs[did];
      if (entry === undefined) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          '@context': ['https://www.w3.org/ns/did/v1'],
          id: did,
          alsoKnownAs: [`at://${entry.handle}`],
          verificationMethod: [],
          service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: entry.pds }],
        }),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { db, engine } = await openDatabase(':memory:');
    index = new Index(db, engine);
    identities = await Identities.create(
      index,
      true,
      `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      { totalMs: 5000, idleMs: 5000 },
      (line) => lines.push(line),
    );
  });

  after(async () => {
    await index.close();
    server.close();
  });

  it('verifies a handle its PDS resolves back to the DID', async () => {
    assert.equal((await identities.owner(GOOD)).handle, 'good.test');
  });

  it('leaves a handle unverified, and says so, when the PDS answers something that is not JSON', async () => {
    const owner = await identities.owner(GARBLED);
    assert.equal(owner.handle, null);
    assert.ok(owner.pds?.startsWith('http://127.0.0.1:'));
    assert.ok(
      lines.some((l) => l.includes('checking the handle garbled.test') && l.includes('not JSON')),
      lines.join('\n'),
    );
  });

  it('leaves a handle unverified, and says so, when the PDS does not answer', async () => {
    assert.equal((await identities.owner(GONE)).handle, null);
    assert.ok(
      lines.some((l) => l.includes('checking the handle gone.test')),
      lines.join('\n'),
    );
  });

  it('tries again a minute after a handle could not be checked, not an hour', async () => {
    mock.timers.enable({ apis: ['Date'], now: Date.now() });
    try {
      assert.equal((await identities.owner(FLAKY)).handle, null);
      flakyDown = false;
      mock.timers.tick(30_000);
      assert.equal((await identities.owner(FLAKY)).handle, null, 'kept for a while: no request per event');
      assert.equal(flakyAsked, 1);
      mock.timers.tick(31_000);
      assert.equal((await identities.owner(FLAKY)).handle, 'flaky.test');
      assert.equal(flakyAsked, 2);
      // A verified handle is kept for the hour.
      mock.timers.tick(10 * 60_000);
      assert.equal((await identities.owner(FLAKY)).handle, 'flaky.test');
      assert.equal(flakyAsked, 2);
    } finally {
      mock.timers.reset();
    }
  });
});
