import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { BodySource } from '../src/xrpc/request-body.ts';
import { HttpPool, type Endpoint } from '../src/xrpc/http-pool.ts';

// A local HTTP server that counts connections and answers each request with the sha-256 of its body.
let server: http.Server;
let endpoint: Endpoint;
let connections = 0;
const sockets = new Set<Socket>();

before(async () => {
  server = http.createServer((req, res) => {
    const hash = crypto.createHash('sha256');
    let size = 0;
    req.on('data', (d: Buffer) => {
      size += d.length;
      hash.update(d);
    });
    req.on('end', () => res.end(JSON.stringify({ size, sha256: hash.digest('hex') })));
  });
  server.on('connection', (s) => {
    connections++;
    sockets.add(s);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = { kind: 'tcp', host: '127.0.0.1', port: (server.address() as AddressInfo).port, secure: false };
});
after(() => {
  for (const s of sockets) s.destroy();
  server.close();
});

/** A body read from memory in pieces, as a pack file is read: `open` counts its readings. */
function pieces(bytes: Buffer, piece: number, claimed = bytes.length): BodySource & { opened: number } {
  const src = {
    length: claimed,
    opened: 0,
    async *open() {
      src.opened++;
      for (let at = 0; at < bytes.length; at += piece) {
        // A file read would wait here.
        await Promise.resolve();
        yield bytes.subarray(at, at + piece);
      }
    },
  };
  return src;
}

describe('request bodies and connections', () => {
  it('streams a body read in pieces, whole and in order', async () => {
    const pool = new HttpPool();
    try {
      const bytes = crypto.randomBytes(3 * 1024 * 1024 + 17);
      const body = pieces(bytes, 256 * 1024);
      const res = await pool.request(endpoint, {
        method: 'POST',
        target: '/',
        headers: { host: 'test' },
        body,
      });
      assert.equal(res.status, 200);
      assert.deepEqual(JSON.parse(res.body.toString()), {
        size: bytes.length,
        sha256: crypto.createHash('sha256').update(bytes).digest('hex'),
      });
      assert.equal(body.opened, 1);
    } finally {
      pool.close();
    }
  });

  it('fails a request whose streamed body ends before the length it announced', async () => {
    const pool = new HttpPool({ idleMs: 5_000 });
    try {
      const body = pieces(crypto.randomBytes(1000), 100, 2000);
      await assert.rejects(
        pool.request(endpoint, { method: 'POST', target: '/', headers: { host: 'test' }, body }),
        /ended at 1000 of 2000 bytes/,
      );
    } finally {
      pool.close();
    }
  });

  it('sends the request after a preconnect on the connection it opened', async () => {
    const pool = new HttpPool();
    try {
      const before = connections;
      const accepted = new Promise<void>((resolve) => server.once('connection', () => resolve()));
      pool.preconnect(endpoint);
      // The connection exists before any request is made: its handshakes overlap the caller's work.
      await accepted;
      assert.equal(connections, before + 1);
      pool.preconnect(endpoint);
      const res = await pool.request(endpoint, {
        method: 'POST',
        target: '/',
        headers: { host: 'test' },
        body: 'x',
      });
      assert.equal(res.status, 200);
      assert.equal(connections, before + 1, 'the request opened a connection of its own');
    } finally {
      pool.close();
    }
  });

  it('connects afresh when the server dropped the preconnected connection', async () => {
    const pool = new HttpPool();
    try {
      const dropped = new Promise<void>((resolve) =>
        server.once('connection', (s) => {
          s.destroy();
          resolve();
        }),
      );
      pool.preconnect(endpoint);
      await dropped;
      const res = await pool.request(endpoint, {
        method: 'GET',
        target: '/',
        headers: { host: 'test' },
        body: null,
      });
      assert.equal(res.status, 200);
    } finally {
      pool.close();
    }
  });
});
