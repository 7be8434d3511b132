// The HTTP client against servers that lie about sizes, never finish or trickle: each test starts
// its own loopback server (helpers/hostile-server.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { IdResolver } from '@atproto/identity';
import { HttpPool, type Endpoint } from 'knotless-core/xrpc/http-pool';
import { fetchOver, transportFor } from 'knotless-core/xrpc/transport';
import { closed, flood, rawServer } from './helpers/hostile-server.ts';

const at = (port: number): Endpoint => ({ kind: 'tcp', host: '127.0.0.1', port, secure: false });
const get = { method: 'GET', target: '/', headers: { host: 'x' }, body: null };

describe('HTTP client against hostile servers', () => {
  it('refuses a 10 GB Content-Length before reading the body', async () => {
    let count = { written: 0 };
    const { port, sockets } = await rawServer((sock) => {
      sock.write('HTTP/1.1 200 OK\r\ncontent-length: 10000000000\r\n\r\n');
      count = flood(sock, Buffer.alloc(64 * 1024, 120));
    });
    await assert.rejects(new HttpPool().request(at(port), { ...get, maxBytes: 1024 * 1024 }), {
      code: 'ETOOLARGE',
      limit: 1024 * 1024,
    });
    // The connection is dropped at once: the flood stops long before 10 GB (or 64 MiB) went out.
    await closed(sockets[0]!);
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
      await assert.rejects(new HttpPool().request(at(port), { ...get, maxBytes: 8 * 1024 * 1024 }), {
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
    const client = new URL('../../knotless-core/src/xrpc/http-pool.ts', import.meta.url).href;
    const script = `
      const { HttpPool } = await import(${JSON.stringify(client)});
      const req = { method: 'GET', target: '/', headers: { host: 'x' }, body: null, maxBytes: 32 * 1024 * 1024 };
      const err = await new HttpPool().request({ kind: 'tcp', host: '127.0.0.1', port: ${port}, secure: false }, req).catch((e) => e);
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
    const res = await new HttpPool().request(at(port), {
      ...get,
      sink: (p) => void got.push(Buffer.from(p)),
    });
    assert.equal(Buffer.concat(got).toString(), 'abcdef');
    assert.equal(res.body.length, 0);
    await assert.rejects(new HttpPool().request(at(port), { ...get, maxBytes: 5, sink: () => undefined }), {
      code: 'ETOOLARGE',
    });
  });

  it('cuts a server that trickles one byte at a time at the total deadline', async () => {
    const { port, sockets } = await rawServer((sock) => {
      sock.write('HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n');
      const t = setInterval(() => (sock.destroyed ? clearInterval(t) : sock.write('x')), 50);
    });
    const started = Date.now();
    // The idle limit is longer than the deadline, so that a stalled (loaded) event loop cannot let it
    // fire first; a byte every 50 ms would keep any idle limit from firing anyway.
    const pool = new HttpPool({ deadlineMs: 800, idleMs: 5000 });
    await assert.rejects(pool.request(at(port), get), { code: 'EDEADLINE', limit: 800 });
    // The total deadline, and not before it.
    const took = Date.now() - started;
    assert.ok(took >= 700, `took ${took} ms`);
    await closed(sockets[0]!);
  });

  it('cuts a server that goes silent mid-answer at the idle timeout', async () => {
    const { port } = await rawServer((sock) =>
      sock.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc'),
    );
    await assert.rejects(new HttpPool({ idleMs: 200 }).request(at(port), get), { code: 'ETRUNCATED' });
  });

  it('honours an abort signal: rejects with its reason and drops the connection', async () => {
    const { port, sockets } = await rawServer(() => undefined);
    const signal = AbortSignal.timeout(200);
    await assert.rejects(new HttpPool().request(at(port), { ...get, signal }), { name: 'TimeoutError' });
    await closed(sockets[0]!);
    const aborted = AbortSignal.abort();
    await assert.rejects(new HttpPool().request(at(port), { ...get, signal: aborted }), {
      name: 'AbortError',
    });
  });

  it('never keeps an HTTP/1.0 answer alive', async () => {
    const { port, sockets } = await rawServer((sock) =>
      sock.write('HTTP/1.0 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok'),
    );
    const pool = new HttpPool();
    for (let i = 0; i < 2; i++) assert.equal((await pool.request(at(port), get)).body.toString(), 'ok');
    assert.equal(sockets.length, 2);
    pool.close();
  });

  it("lets @atproto/identity's timeout abort a PLC that never answers", async () => {
    const { port } = await rawServer(() => undefined);
    const fetch = fetchOver(transportFor({ caCerts: undefined }));
    const resolver = new IdResolver({ plcUrl: `http://127.0.0.1:${port}`, timeout: 300, fetch });
    // The library's own timeout, not anything of ours, ended it.
    await assert.rejects(resolver.did.resolve('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa'), { name: 'TimeoutError' });
  });
});
