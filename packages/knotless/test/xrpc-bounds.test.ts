// What XRPC calls and the identity fetch do with hostile answers: redirects (refused for XRPC,
// bounded and credential-free for fetchOver), answers past their cap, blob downloads past their size.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { makeCertificate } from 'knotless-devnet';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { isKnotlessError } from 'knotless-core/errors';
import { MAX_BLOB_PART_BYTES, loadPack } from 'knotless-core/packs/transfer';
import type { PackEntry } from 'knotless-core/records/ref-record';
import { XrpcClient } from 'knotless-core/xrpc/client';
import { closeTransport, fetchOver, transportFor } from 'knotless-core/xrpc/transport';
import { flood, rawServer, servers } from './helpers/hostile-server.ts';

describe('redirects', () => {
  /**
   * A server that redirects /hop/N to /hop/N+1 up to /hop/8, /away and /xrpc/* to `elsewhere`, and
   * records each request's path and credentials.
   */
  async function redirector(elsewhere = ''): Promise<{ url: string; hits: string[] }> {
    const hits: string[] = [];
    const server = http.createServer((req, res) => {
      hits.push(`${req.url} ${req.headers['authorization'] ?? '-'}`);
      const hop = /^\/hop\/(\d+)$/.exec(req.url ?? '');
      if (req.url === '/away') res.writeHead(302, { location: `${elsewhere}/landed` }).end();
      else if (req.url === '/file') res.writeHead(302, { location: 'file:///etc/passwd' }).end();
      else if (req.url?.startsWith('/xrpc/'))
        res.writeHead(307, { location: `${elsewhere}${req.url}` }).end();
      else if (hop !== null && Number(hop[1]) < 8)
        res.writeHead(301, { location: `/hop/${Number(hop[1]) + 1}` }).end();
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"did":"did:plc:x"}');
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, hits };
  }
  const fetch = (): typeof globalThis.fetch => fetchOver(transportFor({ caCerts: undefined }));

  it('fetchOver follows a few hops when asked, refuses when told to, and stops past five', async () => {
    const a = await redirector();
    assert.equal((await fetch()(`${a.url}/hop/3`, { redirect: 'follow' })).status, 200);
    assert.deepEqual(a.hits, ['/hop/3 -', '/hop/4 -', '/hop/5 -', '/hop/6 -', '/hop/7 -', '/hop/8 -']);
    await assert.rejects(fetch()(`${a.url}/hop/0`, { redirect: 'error' }), /redirected \(HTTP 301\)/);
    await assert.rejects(fetch()(`${a.url}/hop/0`), /more than 5 redirects/);
    assert.equal((await fetch()(`${a.url}/hop/0`, { redirect: 'manual' })).status, 301);
  });

  it('fetchOver follows only to http(s), never from https down to http', async () => {
    const a = await redirector();
    await assert.rejects(fetch()(`${a.url}/file`), /redirected to file: \(HTTP 302\), which was refused/);
    const cert = makeCertificate();
    const tls = https.createServer({ key: cert.key, cert: cert.cert }, (_req, res) =>
      res.writeHead(301, { location: `${a.url}/landed` }).end(),
    );
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    closeTransport(); // the shared transport, now trusting the test certificate
    try {
      const secure = fetchOver(transportFor({ caCerts: cert.certFile }));
      const port = (tls.address() as net.AddressInfo).port;
      await assert.rejects(
        secure(`https://127.0.0.1:${port}/`),
        /redirected to http: \(HTTP 301\), which was refused/,
      );
      assert.ok(!a.hits.includes('/landed -'));
    } finally {
      closeTransport();
      tls.close();
    }
  });

  it('fetchOver drops credentials on leaving the origin', async () => {
    const b = await redirector();
    const a = await redirector(b.url);
    await fetch()(`${a.url}/away`, { headers: { authorization: 'Bearer secret' } });
    assert.deepEqual(a.hits, ['/away Bearer secret']);
    assert.deepEqual(b.hits, ['/landed -']);
  });

  it('XRPC calls do not follow redirects, and say so in one sentence', async () => {
    const b = await redirector();
    const a = await redirector(b.url);
    const client = new XrpcClient(a.url, { transport: transportFor({ caCerts: undefined }) });
    await assert.rejects(
      client.query('com.atproto.server.describeServer'),
      (err: unknown) =>
        isKnotlessError(err, 'pds-error') &&
        /answered com\.atproto\.server\.describeServer with a redirect \(HTTP 307\)/.test(err.message),
    );
    assert.equal(a.hits.length, 1);
    assert.deepEqual(b.hits, []);
  });
});

describe('XRPC answers past their cap', () => {
  it('fail at once with one sentence naming the cap, and are not retried', async () => {
    let hits = 0;
    const { port } = await rawServer((sock) => {
      hits++;
      sock.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n');
      flood(sock, Buffer.alloc(64 * 1024, 32));
    });
    const client = new XrpcClient(`http://127.0.0.1:${port}`, {
      transport: transportFor({ caCerts: undefined }),
      retry: { retries: 4, baseMs: 1, maxWaitMs: 30_000 },
    });
    await assert.rejects(client.query('com.atproto.repo.getRecord', {}, 1000), (err: unknown) => {
      assert.ok(isKnotlessError(err, 'pds-error'));
      assert.match(err.message, /larger than the 1000 bytes allowed for it, so it was cut off/);
      return true;
    });
    await assert.rejects(client.queryBytes('com.atproto.sync.getBlob', {}, 5 * 1024 * 1024), /5 MiB allowed/);
    assert.equal(hits, 2);
  });

  it('call broken framing unreadable, not unreachable', async () => {
    const { port } = await rawServer((sock) =>
      sock.end('HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nabcdef'),
    );
    const client = new XrpcClient(`http://127.0.0.1:${port}`, {
      transport: transportFor({ caCerts: undefined }),
    });
    await assert.rejects(
      client.query('com.atproto.server.describeServer'),
      (err: unknown) =>
        isKnotlessError(err, 'pds-error') && /cut short or unreadable \(HPE_INVALID\)/.test(err.message),
    );
  });

  it('still read an error page longer than a small cap, so that the error is what is reported', async () => {
    const { port } = await rawServer((sock) =>
      sock.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-length: 2000\r\n\r\n${'<p>'.repeat(666)}..`),
    );
    const client = new XrpcClient(`http://127.0.0.1:${port}`, {
      transport: transportFor({ caCerts: undefined }),
    });
    await assert.rejects(client.queryBytes('com.atproto.sync.getBlob', {}, 100), {
      name: 'XrpcError',
      status: 502,
    });
  });
});

describe('blob downloads', () => {
  const pack = (size: number): PackEntry => ({
    id: 'a'.repeat(40),
    size,
    count: 1,
    parts: [{ $type: 'blob', ref: { $link: 'bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaa' }, mimeType: 'x', size }],
  });
  const cache = (): BlobCache => new BlobCache(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-blobs-')));

  it('are cut at the size the record gives the part', async () => {
    let count = { written: 0 };
    const { port } = await rawServer((sock) => {
      sock.write('HTTP/1.1 200 OK\r\n\r\n');
      count = flood(sock, Buffer.alloc(64 * 1024, 1));
    });
    const reader = new XrpcClient(`http://127.0.0.1:${port}`, {
      transport: transportFor({ caCerts: undefined }),
    });
    await assert.rejects(
      loadPack(reader, 'did:plc:x', pack(1000), cache(), () => undefined),
      (err: unknown) =>
        isKnotlessError(err, 'pds-error') && /larger than the 1000 bytes allowed/.test(err.message),
    );
    assert.ok(count.written < 64 * 1024 * 1024);
  });

  it('are not asked for when the record claims a part larger than any blob', async () => {
    let hits = 0;
    const { port } = await rawServer((sock) => {
      hits++;
      sock.end('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n');
    });
    const reader = new XrpcClient(`http://127.0.0.1:${port}`, {
      transport: transportFor({ caCerts: undefined }),
    });
    await assert.rejects(
      loadPack(reader, 'did:plc:x', pack(MAX_BLOB_PART_BYTES + 1), cache(), () => undefined),
      (err: unknown) =>
        isKnotlessError(err, 'corrupt-remote') && /over the \d+ a blob may have/.test(err.message),
    );
    assert.equal(hits, 0);
  });
});
