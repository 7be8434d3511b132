// A handle outside the dev network is looked up without @atproto/identity (every command checks a
// cached handle again): by DNS TXT first, else the handle's https file, as the library does, on a
// DNS server and a handle host that stand in on loopback (no DNS name nor port 443 can be served
// here), the https URL reached through the command's transport.
import assert from 'node:assert/strict';
import dns from 'node:dns/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { IdResolver } from '@atproto/identity';
import { readConfig } from 'knotless-core/config/env';
import { lookupHandle } from 'knotless-core/identity/handle-lookup';
import { fetchOver, transportFor, type Transport } from 'knotless-core/xrpc/transport';
import { dnsServer, RCODE, txtServer } from './helpers/dns-server.ts';

const alice = 'did:plc:aliceaaaaaaaaaaaaaaaaaaa';
const other = 'did:plc:otherbbbbbbbbbbbbbbbbbbb';
let serve: (req: http.IncomingMessage, res: http.ServerResponse) => void = (_req, res) => res.end();
let host: http.Server;
let transport: Transport;
const servers = dns.getServers();

before(async () => {
  host = http.createServer((req, res) => serve(req, res));
  await new Promise<void>((resolve) => host.listen(0, '127.0.0.1', resolve));
  const hostUrl = `http://127.0.0.1:${(host.address() as AddressInfo).port}`;
  const direct = transportFor(readConfig({ HOME: '/nonexistent', KNOTLESS_CACHE_DIR: '/nonexistent' }));
  transport = {
    request: (url, init) =>
      direct.request(
        url.hostname === 'alice.example' ? new URL(`${url.pathname}${url.search}`, hostUrl) : url,
        init,
      ),
    close: () => direct.close(),
  };
});
after(() => {
  dns.setServers(servers);
  host?.close();
});

/** The library's answer for the same handle, over the same transport. */
const library = (handle: string) =>
  new IdResolver({ fetch: fetchOver(transport), timeout: 10_000 }).handle.resolve(handle);

describe('a handle looked up by DNS and https', () => {
  it('takes the one did= TXT record over the https file', async () => {
    dns.setServers([await txtServer(['unrelated', `did=${alice}`])]);
    serve = (_req, res) => res.end(other);
    assert.equal(await lookupHandle(transport, 'alice.example', 10_000), alice);
  });

  it('without a record (or with two), reads the https file, following a redirect', async () => {
    serve = (req, res) =>
      req.url === '/.well-known/atproto-did'
        ? res.writeHead(302, { location: '/moved' }).end()
        : res.end(`${alice}\nsecond line`);
    for (const server of [
      await dnsServer(RCODE.NXDOMAIN),
      await txtServer([`did=${alice}`, `did=${other}`]),
    ]) {
      dns.setServers([server]);
      assert.equal(await lookupHandle(transport, 'alice.example', 10_000), alice);
      assert.equal(await library('alice.example'), alice);
    }
  });

  it('names nothing when neither way does: no record, an error page, a file that is no DID, no host', async () => {
    dns.setServers([await dnsServer(RCODE.NXDOMAIN)]);
    // An error page naming a DID is still an error (the library would take its first line).
    serve = (_req, res) => res.writeHead(404).end(alice);
    assert.equal(await lookupHandle(transport, 'alice.example', 10_000), undefined);
    serve = (_req, res) => res.end('<html>not a did</html>');
    assert.equal(await lookupHandle(transport, 'alice.example', 10_000), undefined);
    assert.equal(await library('alice.example'), undefined);
    serve = (req) => req.socket.destroy();
    assert.equal(await lookupHandle(transport, 'alice.example', 10_000), undefined);
    assert.equal(await library('alice.example'), undefined);
  });

  it('gives up on a host that never answers, at the time limit', async () => {
    dns.setServers([await dnsServer(RCODE.NXDOMAIN)]);
    serve = () => {
      // Never answers.
    };
    assert.equal(await lookupHandle(transport, 'alice.example', 200), undefined);
  });

  // The clock is the test's: the lookup must set its limit at the time it was given, and the limit
  // firing must drop the request the host holds. A hang here (a limit never heeded) ends at the test's
  // own bound, with its message.
  it(
    'sets its limit at the time given, and drops the request when it fires',
    { timeout: 120_000 },
    async () => {
      dns.setServers([await dnsServer(RCODE.NXDOMAIN)]);
      let arrived!: () => void;
      const asked = new Promise<void>((resolve) => (arrived = resolve));
      let dropped!: () => void;
      const cut = new Promise<void>((resolve) => (dropped = resolve));
      serve = (req) => {
        // Never answers; notes the request, and the client going away.
        req.socket.once('close', () => dropped());
        arrived();
      };
      const clock = new AbortController();
      const set: number[] = [];
      const lookup = lookupHandle(transport, 'alice.example', 3_000, (ms) => {
        set.push(ms);
        return clock.signal;
      });
      await asked;
      assert.deepEqual(set, [3_000], 'the limits the lookup set');
      // The limit's time has come.
      clock.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
      assert.equal(await lookup, undefined);
      await cut;
    },
  );
});
