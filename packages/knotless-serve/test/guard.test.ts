// The address guard: every special-purpose range is refused (IPv4 and IPv6, embedded IPv4 included),
// public unicast passes, and a hostname is judged by every address it resolves to, at connect time.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  AddressRefused,
  checkAddresses,
  checkUrl,
  guardedFetch,
  guardedTransport,
  refusedReason,
} from '../src/net/guard.ts';

const GET = { method: 'GET', headers: {}, body: null };

/** One address inside each range the guard must refuse, with the range it stands for. */
const REFUSED: [string, string][] = [
  ['0.0.0.0', '0.0.0.0/8 "this network"'],
  ['0.1.2.3', '0.0.0.0/8 "this network"'],
  ['10.1.2.3', '10.0.0.0/8 private'],
  ['100.64.0.1', '100.64.0.0/10 carrier-grade NAT'],
  ['100.127.255.254', '100.64.0.0/10 carrier-grade NAT'],
  ['127.0.0.1', '127.0.0.0/8 loopback'],
  ['127.255.255.254', '127.0.0.0/8 loopback'],
  ['169.254.169.254', '169.254.0.0/16 link-local (cloud metadata)'],
  ['172.16.0.1', '172.16.0.0/12 private'],
  ['172.31.255.254', '172.16.0.0/12 private'],
  ['192.0.0.8', '192.0.0.0/24 IETF protocol assignments'],
  ['192.0.2.10', '192.0.2.0/24 TEST-NET-1'],
  ['192.88.99.1', '192.88.99.0/24 6to4 relay anycast'],
  ['192.168.1.1', '192.168.0.0/16 private'],
  ['198.18.0.1', '198.18.0.0/15 benchmarking'],
  ['198.19.255.254', '198.18.0.0/15 benchmarking'],
  ['198.51.100.7', '198.51.100.0/24 TEST-NET-2'],
  ['203.0.113.9', '203.0.113.0/24 TEST-NET-3'],
  ['224.0.0.1', '224.0.0.0/4 multicast'],
  ['239.255.255.250', '224.0.0.0/4 multicast'],
  ['240.0.0.1', '240.0.0.0/4 reserved'],
  ['255.255.255.255', 'broadcast'],
  ['::', 'IPv6 unspecified'],
  ['::1', 'IPv6 loopback'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback, hex form'],
  ['::ffff:10.0.0.1', 'IPv4-mapped private'],
  ['::ffff:169.254.169.254', 'IPv4-mapped link-local'],
  ['::ffff:198.18.0.1', 'IPv4-mapped benchmarking'],
  ['::ffff:0:10.0.0.1', '::ffff:0:0/96 IPv4-translated (RFC 6145)'],
  ['::127.0.0.1', 'deprecated IPv4-compatible form'],
  ['::8.8.8.8', 'deprecated IPv4-compatible form, even of a public address'],
  ['64:ff9b::a00:1', '64:ff9b::/96 NAT64 of 10.0.0.1'],
  ['64:ff9b::7f00:1', '64:ff9b::/96 NAT64 of 127.0.0.1'],
  ['64:ff9b::808:808', '64:ff9b::/96 NAT64, even of a public address'],
  ['64:ff9b:1::1', '64:ff9b:1::/48 local-use NAT64'],
  ['100::1', '100::/64 discard'],
  ['2001::1', '2001::/32 Teredo'],
  ['2001:2::1', '2001:2::/48 benchmarking'],
  ['2001:db8::1', '2001:db8::/32 documentation'],
  ['2001:10::1', 'ORCHID'],
  ['2002:7f00:1::1', '2002::/16 6to4 of 127.0.0.1'],
  ['2002:c0a8:101::1', '2002::/16 6to4 of 192.168.1.1'],
  ['2002:808:808::1', '2002::/16 6to4, even of a public address'],
  ['3fff::1', '3fff::/20 documentation'],
  ['5f00::1', '5f00::/16 segment routing'],
  ['fc00::1', 'fc00::/7 unique local'],
  ['fd12:3456::1', 'fc00::/7 unique local'],
  ['fe80::1', 'fe80::/10 link-local'],
  ['fe80::1%eth0', 'fe80::/10 link-local with a zone'],
  ['fec0::1', 'fec0::/10 deprecated site-local'],
  ['ff02::1', 'ff00::/8 multicast'],
  ['not-an-address', 'not an address at all'],
];

const ALLOWED = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.215.14',
  '2606:4700:4700::1111',
  '2001:4860:4860::8888',
  '2a00:1450:4001:80b::200e',
  '::ffff:8.8.8.8',
];

describe('address guard', () => {
  for (const [address, range] of REFUSED)
    it(`refuses ${address} (${range})`, () => {
      assert.notEqual(refusedReason(address), undefined);
      const literal = address.includes(':') ? `[${address.replace('%', '%25')}]` : address;
      if (address !== 'not-an-address' && !address.includes('%'))
        assert.throws(() => checkUrl(new URL(`http://${literal}/`), false), AddressRefused);
    });

  it('names a string that is not an IP address as such', () => {
    assert.equal(refusedReason('not-an-address'), 'not an IP address');
    assert.equal(refusedReason('example.com'), 'not an IP address');
  });

  for (const address of ALLOWED)
    it(`allows public ${address}`, () => {
      assert.equal(refusedReason(address), undefined);
      const literal = address.includes(':') ? `[${address}]` : address;
      assert.doesNotThrow(() => checkUrl(new URL(`https://${literal}/`), false));
    });

  it('refuses a name if any one of its addresses is private', () => {
    assert.doesNotThrow(() => checkAddresses('pds.example', [{ address: '8.8.8.8' }]));
    assert.throws(
      () => checkAddresses('pds.example', [{ address: '8.8.8.8' }, { address: '10.0.0.1' }]),
      /pds\.example resolves to 10\.0\.0\.1/,
    );
    assert.throws(
      () => checkAddresses('pds.example', [{ address: '2606:4700::1' }, { address: 'fd00::1' }]),
      AddressRefused,
    );
  });

  it('refuses schemes other than http(s), in dev mode too', () => {
    for (const u of ['file:///etc/passwd', 'ftp://8.8.8.8/', 'gopher://8.8.8.8/'])
      assert.throws(() => checkUrl(new URL(u), true), AddressRefused);
  });

  it('refuses numeric spellings of loopback (the URL parser normalises them first)', () => {
    for (const u of ['http://2130706433/', 'http://0x7f.1/', 'http://017700000001/', 'http://127.1/'])
      assert.throws(() => checkUrl(new URL(u), false), AddressRefused, u);
  });
});

describe('guarded transport', () => {
  let server: http.Server;
  let port: number;
  let hits = 0;
  before(async () => {
    server = http.createServer((_req, res) => {
      hits++;
      res.end('secret');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it('refuses a hostname that resolves to loopback, without connecting', async () => {
    const transport = guardedTransport(false, { totalMs: 5000, idleMs: 5000 });
    try {
      const before = hits;
      await assert.rejects(
        transport.request(new URL(`http://localhost:${port}/`), GET),
        (err: unknown) => err instanceof AddressRefused && /localhost resolves to/.test(err.message),
      );
      await assert.rejects(transport.request(new URL(`http://127.0.0.1:${port}/`), GET), AddressRefused);
      await assert.rejects(
        transport.request(new URL(`http://[::ffff:127.0.0.1]:${port}/`), GET),
        AddressRefused,
      );
      assert.equal(hits, before, 'no request reached the loopback server');
    } finally {
      transport.close();
    }
  });

  it("identity resolution's fetch goes through the guard, not the library's default fetch", async () => {
    const before = hits;
    const f = guardedFetch(false, { totalMs: 5000, idleMs: 5000 });
    await assert.rejects(f(`http://localhost:${port}/.well-known/did.json`), AddressRefused);
    await assert.rejects(f(`http://127.0.0.1:${port}/xrpc/x`), AddressRefused);
    assert.equal(hits, before, 'no request reached the loopback server');
    const dev = guardedFetch(true, { totalMs: 5000, idleMs: 5000 });
    assert.equal(await (await dev(`http://localhost:${port}/`)).text(), 'secret');
    // The resolver's timeout is an abort signal: it must stop the request.
    const aborted = AbortSignal.abort(new Error('resolver timeout'));
    await assert.rejects(dev(`http://localhost:${port}/`, { signal: aborted }), /resolver timeout/);
  });

  it('reaches loopback in dev mode, where the guard is off', async () => {
    const transport = guardedTransport(true, { totalMs: 5000, idleMs: 5000 });
    try {
      const res = await transport.request(new URL(`http://localhost:${port}/`), GET);
      assert.equal(Buffer.from(res.body).toString(), 'secret');
    } finally {
      transport.close();
    }
  });

  it('stops a request that runs past its total time even while bytes trickle in', async () => {
    const drip = http.createServer((_req, res) => {
      res.writeHead(200);
      const timer = setInterval(() => res.write('.'), 50);
      res.on('close', () => clearInterval(timer));
    });
    await new Promise<void>((r) => drip.listen(0, '127.0.0.1', r));
    const transport = guardedTransport(true, { totalMs: 400, idleMs: 5000 });
    try {
      const url = new URL(`http://127.0.0.1:${(drip.address() as AddressInfo).port}/`);
      // The total limit, by its own words (the idle one is 5 s and each byte comes within 50 ms).
      await assert.rejects(transport.request(url, GET), /longer than 400 ms/);
    } finally {
      transport.close();
      drip.closeAllConnections();
      await new Promise<void>((r) => drip.close(() => r()));
    }
  });
});
