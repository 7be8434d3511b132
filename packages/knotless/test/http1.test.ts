import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CID } from 'multiformats/cid';
import { create as createDigest } from 'multiformats/hashes/digest';
import { DEFAULT_HTTP_TIMEOUT_MS, readConfig } from 'knotless-core/config/env';
import { blobMatchesCid, cidForBlob } from 'knotless-core/packs/cid';
import {
  BodyDecoder,
  BodyTooLarge,
  bodyFraming,
  parseResponseHead,
  writeRequestHead,
} from 'knotless-core/xrpc/http1-codec';
import { Http1Pool } from 'knotless-core/xrpc/http1';
import { transportFor } from 'knotless-core/xrpc/transport';

describe('blob CIDs', () => {
  it('match what multiformats computes, for every length around the base32 block size', () => {
    for (let n = 0; n < 40; n++) {
      const bytes = crypto.randomBytes(n * 7);
      const digest = crypto.createHash('sha256').update(bytes).digest();
      const expected = CID.createV1(0x55, createDigest(0x12, digest)).toString();
      assert.equal(cidForBlob(bytes), expected);
      assert.ok(blobMatchesCid(bytes, expected));
    }
  });

  it('refuse other bytes, other codecs and other encodings of the right digest', () => {
    const bytes = Buffer.from('pack');
    const digest = createDigest(0x12, crypto.createHash('sha256').update(bytes).digest());
    assert.ok(!blobMatchesCid(Buffer.from('other'), cidForBlob(bytes)));
    assert.ok(!blobMatchesCid(bytes, CID.createV1(0x71, digest).toString()));
    assert.ok(!blobMatchesCid(bytes, cidForBlob(bytes).toUpperCase()));
    assert.ok(!blobMatchesCid(bytes, 'not a cid'));
  });
});

describe('HTTP/1.1 codec', () => {
  it('writes a request head with a content length, and refuses header injection', () => {
    const head = writeRequestHead('POST', '/x?a=1', { host: 'h', 'content-type': 'a/b' }, 3).toString();
    assert.equal(head, 'POST /x?a=1 HTTP/1.1\r\nhost: h\r\ncontent-type: a/b\r\ncontent-length: 3\r\n\r\n');
    assert.throws(() => writeRequestHead('GET', '/', { a: 'b\r\nevil: 1' }, null), TypeError);
  });

  it('parses a head only once it is complete, joining repeated headers', () => {
    const raw = Buffer.from('HTTP/1.1 200 OK\r\nA: 1\r\na: 2\r\nContent-Length: 0\r\n\r\nrest');
    assert.equal(parseResponseHead(raw.subarray(0, 20)), undefined);
    const head = parseResponseHead(raw)!;
    assert.equal(head.status, 200);
    assert.equal(head.headers['a'], '1, 2');
    assert.equal(raw.subarray(head.length).toString(), 'rest');
    assert.throws(() => parseResponseHead(Buffer.from('SSH-2.0\r\n\r\n')));
  });

  it('decodes chunked bodies fed one byte at a time, trailers included', () => {
    const wire = Buffer.from('5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-T: 1\r\n\r\nNEXT');
    const d = new BodyDecoder({ kind: 'chunked' });
    let rest: Buffer | undefined;
    for (let i = 0; i < wire.length && rest === undefined; i++) rest = d.push(wire.subarray(i, i + 1));
    assert.ok(d.done);
    assert.equal(d.body().toString(), 'hello world!');
    assert.equal(rest!.length, 0);
  });

  it('frames bodies by method, status and headers', () => {
    const head = (status: number, headers: Record<string, string>) => ({
      status,
      headers,
      length: 0,
      minor: 1,
    });
    assert.deepEqual(bodyFraming('HEAD', head(200, { 'content-length': '5' })), { kind: 'none' });
    assert.deepEqual(bodyFraming('GET', head(204, {})), { kind: 'none' });
    assert.deepEqual(bodyFraming('GET', head(200, { 'transfer-encoding': 'chunked' })), { kind: 'chunked' });
    assert.deepEqual(bodyFraming('GET', head(200, {})), { kind: 'close' });
    assert.throws(() => bodyFraming('GET', head(200, { 'content-length': '-1' })));
  });

  it('refuses ambiguous or absurd framing: differing or huge lengths, other codings, long chunk sizes', () => {
    const head = (headers: Record<string, string>) => ({ status: 200, headers, length: 0, minor: 1 });
    assert.deepEqual(bodyFraming('GET', head({ 'content-length': '5, 5' })), { kind: 'length', length: 5 });
    assert.throws(() => bodyFraming('GET', head({ 'content-length': '5, 6' })), { code: 'HPE_INVALID' });
    assert.throws(() => bodyFraming('GET', head({ 'content-length': '1'.repeat(16) })), {
      code: 'HPE_INVALID',
    });
    assert.throws(() => bodyFraming('GET', head({ 'transfer-encoding': 'gzip' })), { code: 'HPE_INVALID' });
    // Chunked wins over a Content-Length beside it (RFC 9112 §6.3).
    assert.deepEqual(bodyFraming('GET', head({ 'transfer-encoding': 'chunked', 'content-length': '3' })), {
      kind: 'chunked',
    });
    const d = new BodyDecoder({ kind: 'chunked' });
    assert.throws(() => d.push(Buffer.from('ffffffffffffffffffff\r\n')), { code: 'HPE_INVALID' });
    const long = new BodyDecoder({ kind: 'chunked' });
    assert.throws(() => long.push(Buffer.from('3\r\nabcdef\r\n0\r\n\r\n')), { code: 'HPE_INVALID' });
    const t = new BodyDecoder({ kind: 'chunked' });
    assert.throws(() => t.push(Buffer.from(`0\r\nX: ${'y'.repeat(20_000)}`)), { code: 'HPE_INVALID' });
  });

  it('reads the HTTP version, so that HTTP/1.0 answers are known', () => {
    assert.equal(parseResponseHead(Buffer.from('HTTP/1.0 200 OK\r\n\r\n'))!.minor, 0);
    assert.equal(parseResponseHead(Buffer.from('HTTP/1.1 200 OK\r\n\r\n'))!.minor, 1);
  });

  it('refuses a body past its cap: announced, announced by a chunk, or growing', () => {
    assert.throws(() => new BodyDecoder({ kind: 'length', length: 10e9 }, { max: 1000 }), BodyTooLarge);
    const chunk = new BodyDecoder({ kind: 'chunked' }, { max: 1000 });
    assert.throws(() => chunk.push(Buffer.from('3e9\r\n')), BodyTooLarge);
    const many = new BodyDecoder({ kind: 'chunked' }, { max: 1000 });
    assert.throws(() => {
      for (let i = 0; i < 20; i++) many.push(Buffer.from(`64\r\n${'x'.repeat(100)}\r\n`));
    }, BodyTooLarge);
    assert.ok(many.size <= 1000);
    const close = new BodyDecoder({ kind: 'close' }, { max: 1000 });
    close.push(Buffer.alloc(1000));
    assert.throws(() => close.push(Buffer.alloc(1)), { code: 'ETOOLARGE', limit: 1000 });
    const exact = new BodyDecoder({ kind: 'length', length: 1000 }, { max: 1000 });
    assert.deepEqual(exact.push(Buffer.alloc(1000)), Buffer.alloc(0));
  });

  it('hands a body to a sink piece by piece instead of keeping it', () => {
    const got: Buffer[] = [];
    const d = new BodyDecoder({ kind: 'chunked' }, { sink: (p) => got.push(Buffer.from(p)), max: 10 });
    d.push(Buffer.from('5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n'));
    assert.ok(d.done);
    assert.equal(Buffer.concat(got).toString(), 'helloworld');
    assert.equal(d.body().length, 0);
  });
});

describe('HTTP/1.1 pool', () => {
  let server: http.Server;
  let port = 0;
  const connections: net.Socket[] = [];
  before(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        if (req.url === '/chunked') {
          res.write('a'.repeat(70_000));
          res.end('b');
        } else if (req.url === '/close') {
          res.writeHead(200, { connection: 'close' }).end('bye');
        } else res.end(JSON.stringify({ method: req.method, url: req.url, length: body.length }));
      });
    });
    server.on('connection', (s: net.Socket) => connections.push(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  after(() => server.close());

  const endpoint = () => ({ kind: 'tcp' as const, host: '127.0.0.1', port, secure: false });

  it('reuses one connection for consecutive requests, and sends bodies', async () => {
    const pool = new Http1Pool();
    const before = connections.length;
    for (let i = 0; i < 3; i++) {
      const res = await pool.request(endpoint(), {
        method: 'POST',
        target: `/p${i}`,
        headers: { host: 'x' },
        body: 'abc',
      });
      assert.deepEqual(JSON.parse(res.body.toString()), { method: 'POST', url: `/p${i}`, length: 3 });
    }
    assert.equal(connections.length - before, 1);
    const big = await pool.request(endpoint(), {
      method: 'GET',
      target: '/chunked',
      headers: { host: 'x' },
      body: null,
    });
    assert.equal(big.body.length, 70_001);
    pool.close();
  });

  it('sends again on a fresh connection when the server closed the idle one', async () => {
    const pool = new Http1Pool();
    await pool.request(endpoint(), { method: 'GET', target: '/a', headers: { host: 'x' }, body: null });
    for (const s of connections) s.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const res = await pool.request(endpoint(), {
      method: 'GET',
      target: '/b',
      headers: { host: 'x' },
      body: null,
    });
    assert.equal((JSON.parse(res.body.toString()) as { url: string }).url, '/b');
    pool.close();
  });

  it('does not reuse a connection the server said it closes', async () => {
    const pool = new Http1Pool();
    const before = connections.length;
    for (let i = 0; i < 2; i++) {
      const res = await pool.request(endpoint(), {
        method: 'GET',
        target: '/close',
        headers: { host: 'x' },
        body: null,
      });
      assert.equal(res.body.toString(), 'bye');
    }
    assert.equal(connections.length - before, 2);
    pool.close();
  });

  it('reports a refused connection with its code', async () => {
    const pool = new Http1Pool();
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const dead = (closed.address() as net.AddressInfo).port;
    await new Promise((r) => closed.close(r));
    await assert.rejects(
      pool.request({ ...endpoint(), port: dead }, { method: 'GET', target: '/', headers: {}, body: null }),
      { code: 'ECONNREFUSED' },
    );
  });

  it('reports an answer cut short as ETRUNCATED, not as an unreachable server', async () => {
    const cutter = net.createServer((sock) =>
      sock.once('data', () => {
        sock.write('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n0123456789');
        setTimeout(() => sock.destroy(), 20);
      }),
    );
    await new Promise<void>((resolve) => cutter.listen(0, '127.0.0.1', resolve));
    const p = (cutter.address() as net.AddressInfo).port;
    await assert.rejects(
      new Http1Pool().request(
        { ...endpoint(), port: p },
        { method: 'GET', target: '/', headers: {}, body: null },
      ),
      { code: 'ETRUNCATED' },
    );
    cutter.close();
  });

  it('reaches localhost without asking the resolver', async () => {
    const res = await transportFor({ caCerts: undefined }).request(new URL(`http://localhost:${port}/l`), {
      method: 'GET',
      headers: {},
      body: null,
    });
    assert.equal((JSON.parse(res.body.toString()) as { url: string }).url, '/l');
  });
});

describe('KNOTLESS_HTTP_TIMEOUT', () => {
  it('sets the limit on one request in seconds; 0 or nonsense mean the two-minute default', () => {
    assert.equal(readConfig({}).httpTimeoutMs, DEFAULT_HTTP_TIMEOUT_MS);
    assert.equal(DEFAULT_HTTP_TIMEOUT_MS, 120_000);
    assert.equal(readConfig({ KNOTLESS_HTTP_TIMEOUT: '3' }).httpTimeoutMs, 3000);
    assert.equal(readConfig({ KNOTLESS_HTTP_TIMEOUT: '0.5' }).httpTimeoutMs, 500);
    assert.equal(readConfig({ KNOTLESS_HTTP_TIMEOUT: '0' }).httpTimeoutMs, DEFAULT_HTTP_TIMEOUT_MS);
    assert.equal(readConfig({ KNOTLESS_HTTP_TIMEOUT: 'soon' }).httpTimeoutMs, DEFAULT_HTTP_TIMEOUT_MS);
  });
});
