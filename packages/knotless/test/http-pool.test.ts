import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { CID } from 'multiformats/cid';
import { create as createDigest } from 'multiformats/hashes/digest';
import { DEFAULT_HTTP_TIMEOUT_MS, readConfig } from 'knotless-core/config/env';
import { blobMatchesCid, cidForBlob } from 'knotless-core/records/cid';
import { HttpPool } from 'knotless-core/xrpc/http-pool';
import { transportFor } from 'knotless-core/xrpc/transport';
import { rawServer } from './helpers/hostile-server.ts';

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

describe("framing is node:http's, against raw servers", () => {
  const get = (port: number, target = '/') =>
    new HttpPool().request(
      { kind: 'tcp', host: '127.0.0.1', port, secure: false },
      { method: 'GET', target, headers: { host: 'x' }, body: null },
    );

  it('refuses header injection before anything is sent', async () => {
    const { port, sockets } = await rawServer((sock) => sock.end('HTTP/1.1 204 No Content\r\n\r\n'));
    await assert.rejects(
      new HttpPool().request(
        { kind: 'tcp', host: '127.0.0.1', port, secure: false },
        { method: 'GET', target: '/', headers: { a: 'b\r\nevil: 1' }, body: null },
      ),
      TypeError,
    );
    assert.equal(sockets.length, 0);
  });

  it('decodes a chunked body sent one byte at a time, trailers included, and joins repeated headers', async () => {
    const wire =
      'HTTP/1.1 200 OK\r\nA: 1\r\na: 2\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n1;ext=1\r\n \r\n6\r\nworld!\r\n0\r\nX-T: 1\r\n\r\n';
    const { port } = await rawServer((sock) => {
      let i = 0;
      const next = (): void => {
        if (sock.destroyed) return;
        if (i >= wire.length) return void sock.end();
        sock.write(wire[i++]!, next);
      };
      next();
    });
    const res = await get(port);
    assert.equal(res.body.toString(), 'hello world!');
    assert.equal(res.headers['a'], '1, 2');
  });

  it('refuses ambiguous framing or bytes that are no HTTP answer as HPE_INVALID', async () => {
    for (const answer of [
      'HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nabcdef',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffffffff\r\n',
      'SSH-2.0-OpenSSH\r\n\r\n',
    ]) {
      const { port } = await rawServer((sock) => sock.end(answer));
      await assert.rejects(get(port), { code: 'HPE_INVALID' }, answer);
    }
  });

  it('refuses a body past its cap announced by a chunk, or growing chunk by chunk', async () => {
    const { port } = await rawServer((sock) =>
      sock.end(
        'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n' +
          `64\r\n${'x'.repeat(100)}\r\n`.repeat(20) +
          '0\r\n\r\n',
      ),
    );
    await assert.rejects(
      new HttpPool().request(
        { kind: 'tcp', host: '127.0.0.1', port, secure: false },
        { method: 'GET', target: '/', headers: { host: 'x' }, body: null, maxBytes: 1000 },
      ),
      { code: 'ETOOLARGE', limit: 1000 },
    );
  });
});

describe('HTTP pool', () => {
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
    const pool = new HttpPool();
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
    const pool = new HttpPool();
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
    const pool = new HttpPool();
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
    const pool = new HttpPool();
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
      new HttpPool().request(
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
