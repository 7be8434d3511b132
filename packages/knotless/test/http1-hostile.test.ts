// The HTTP client against servers that lie about sizes, never finish, trickle, or redirect: each
// test starts its own loopback server, raw TCP where Node's server would refuse to misbehave.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import http from 'node:http';
import net from 'node:net';
import { after, describe, it } from 'node:test';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { IdResolver } from '@atproto/identity';
import { BlobCache } from '../src/cache/blob-cache.ts';
import { isKnotlessError } from '../src/errors.ts';
import { MAX_BLOB_PART_BYTES, loadPack } from '../src/remote/packs.ts';
import type { PackEntry } from '../src/remote/ref-record.ts';
import { XrpcClient } from '../src/xrpc/client.ts';
import { Http1Pool, type Endpoint } from '../src/xrpc/http1.ts';
import { closeTransport, fetchOver, transportFor } from '../src/xrpc/transport.ts';

const servers: net.Server[] = [];
after(() => {
  for (const s of servers) s.close();
  closeTransport();
});

/** A raw TCP server that calls `answer` with each connection once the request head is in. */
async function rawServer(
  answer: (sock: net.Socket) => void,
): Promise<{ port: number; sockets: net.Socket[] }> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((sock) => {
    sockets.push(sock);
    sock.on('error', () => sock.destroy());
    let head = '';
    const onData = (d: Buffer): void => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      sock.off('data', onData);
      answer(sock);
    };
    sock.on('data', onData);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, sockets };
}

const at = (port: number): Endpoint => ({ kind: 'tcp', host: '127.0.0.1', port, secure: false });
const get = { method: 'GET', target: '/', headers: { host: 'x' }, body: null };
const closed = (sock: net.Socket): Promise<void> =>
  sock.destroyed ? Promise.resolve() : new Promise((resolve) => sock.once('close', () => resolve()));

/** Writes `piece` as fast as the socket drains, until it closes; returns the bytes written. */
function flood(sock: net.Socket, piece: Buffer): { written: number } {
  const count = { written: 0 };
  const pump = (): void => {
    while (!sock.destroyed && count.written < 20e9) {
      count.written += piece.length;
      if (!sock.write(piece)) return void sock.once('drain', pump);
    }
  };
  pump();
  return count;
}

describe('HTTP client against hostile servers', () => {
  it('refuses a 10 GB Content-Length before reading the body', async () => {
    let count = { written: 0 };
    const { port, sockets } = await rawServer((sock) => {
      sock.write('HTTP/1.1 200 OK\r\ncontent-length: 10000000000\r\n\r\n');
      count = flood(sock, Buffer.alloc(64 * 1024, 120));
    });
    const started = Date.now();
    await assert.rejects(new Http1Pool().request(at(port), { ...get, maxBytes: 1024 * 1024 }), {
      code: 'ETOOLARGE',
      limit: 1024 * 1024,
    });
    await closed(sockets[0]!);
    assert.ok(Date.now() - started < 5000);
    assert.ok(count.written < 64 * 1024 * 1024, `the server wrote ${count.written} bytes`);
  });

  it('cuts an endless body (chunked or close-delimited) at the cap, memory bounded', async () => {
    for (const chunked of [true, false]) {
      let count = { written: 0 };
      const piece = chunked
        ? Buffer.from(`10000\r\n${'x'.repeat(0x10000)}\r\n`)
        : Buffer.alloc(64 * 1024, 120);
      const { port, sockets } = await rawServer((sock) => {
        sock.write(`HTTP/1.1 200 OK\r\n${chunked ? 'transfer-encoding: chunked\r\n' : ''}\r\n`);
        count = flood(sock, piece);
      });
      const rss = process.memoryUsage().rss;
      await assert.rejects(new Http1Pool().request(at(port), { ...get, maxBytes: 8 * 1024 * 1024 }), {
        code: 'ETOOLARGE',
      });
      await closed(sockets[0]!);
      // Without the cap the client reads until the server's 20 GB are in (or memory runs out).
      assert.ok(count.written < 128 * 1024 * 1024, `the server wrote ${count.written} bytes`);
      assert.ok(process.memoryUsage().rss - rss < 200 * 1024 * 1024);
    }
  });

  it('keeps a separate process small while a server pours 10 GB at it', async () => {
    let count = { written: 0 };
    const { port } = await rawServer((sock) => {
      sock.write('HTTP/1.1 200 OK\r\n\r\n');
      count = flood(sock, Buffer.alloc(256 * 1024, 120));
    });
    // A process of its own, so that its peak RSS is the client's alone (not the server's, nor the tests').
    const client = new URL('../src/xrpc/http1.ts', import.meta.url).href;
    const script = `
      const { Http1Pool } = await import(${JSON.stringify(client)});
      const req = { method: 'GET', target: '/', headers: { host: 'x' }, body: null, maxBytes: 32 * 1024 * 1024 };
      const err = await new Http1Pool().request({ kind: 'tcp', host: '127.0.0.1', port: ${port}, secure: false }, req).catch((e) => e);
      console.log(JSON.stringify({ code: err.code, peakKiB: process.resourceUsage().maxRSS }));`;
    const { stdout: out } = await promisify(execFile)(process.execPath, [
      '--input-type=module',
      '-e',
      script,
    ]);
    const { code, peakKiB } = JSON.parse(out) as { code: string; peakKiB: number };
    assert.equal(code, 'ETOOLARGE');
    // Node alone is about 45 MiB; the 32 MiB cap held (and concatenated) at most doubles it.
    assert.ok(peakKiB < 160 * 1024, `peak RSS ${peakKiB} KiB`);
    assert.ok(count.written < 256 * 1024 * 1024, `the server wrote ${count.written} bytes`);
  });

  it('streams a body to a sink without keeping it, the cap holding all the same', async () => {
    const { port } = await rawServer((sock) => {
      sock.end(`HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nabcdef`);
    });
    const got: Buffer[] = [];
    const res = await new Http1Pool().request(at(port), { ...get, sink: (p) => got.push(Buffer.from(p)) });
    assert.equal(Buffer.concat(got).toString(), 'abcdef');
    assert.equal(res.body.length, 0);
    await assert.rejects(new Http1Pool().request(at(port), { ...get, maxBytes: 5, sink: () => undefined }), {
      code: 'ETOOLARGE',
    });
  });

  it('cuts a server that trickles one byte at a time at the total deadline', async () => {
    const { port, sockets } = await rawServer((sock) => {
      sock.write('HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n');
      const t = setInterval(() => (sock.destroyed ? clearInterval(t) : sock.write('x')), 50);
    });
    const started = Date.now();
    const pool = new Http1Pool({ deadlineMs: 800, idleMs: 400 });
    await assert.rejects(pool.request(at(port), get), { code: 'EDEADLINE', limit: 800 });
    const took = Date.now() - started;
    assert.ok(took >= 700 && took < 3000, `took ${took} ms`);
    await closed(sockets[0]!);
  });

  it('cuts a server that goes silent mid-answer at the idle timeout', async () => {
    const { port } = await rawServer((sock) =>
      sock.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc'),
    );
    await assert.rejects(new Http1Pool({ idleMs: 200 }).request(at(port), get), { code: 'ETRUNCATED' });
  });

  it('honours an abort signal: rejects with its reason and drops the connection', async () => {
    const { port, sockets } = await rawServer(() => undefined);
    const signal = AbortSignal.timeout(200);
    await assert.rejects(new Http1Pool().request(at(port), { ...get, signal }), { name: 'TimeoutError' });
    await closed(sockets[0]!);
    const aborted = AbortSignal.abort();
    await assert.rejects(new Http1Pool().request(at(port), { ...get, signal: aborted }), {
      name: 'AbortError',
    });
  });

  it('never keeps an HTTP/1.0 answer alive', async () => {
    const { port, sockets } = await rawServer((sock) =>
      sock.write('HTTP/1.0 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok'),
    );
    const pool = new Http1Pool();
    for (let i = 0; i < 2; i++) assert.equal((await pool.request(at(port), get)).body.toString(), 'ok');
    assert.equal(sockets.length, 2);
    pool.close();
  });

  it("lets @atproto/identity's timeout abort a PLC that never answers", async () => {
    const { port } = await rawServer(() => undefined);
    const fetch = fetchOver(transportFor({ caCerts: undefined }));
    const resolver = new IdResolver({ plcUrl: `http://127.0.0.1:${port}`, timeout: 300, fetch });
    const started = Date.now();
    await assert.rejects(resolver.did.resolve('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'));
    assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
  });
});

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
