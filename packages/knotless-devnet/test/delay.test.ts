import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { startDelayLink } from '../src/delay.ts';
import { makeCertificate } from '../src/tls.ts';

type Server = http.Server | https.Server;

/** Listens on 127.0.0.1 at a free port and returns the port. */
async function listen(server: Server | net.Server): Promise<number> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}

/** Answers 'ok', or echoes a POST's body. */
function handler(req: http.IncomingMessage, res: http.ServerResponse): void {
  if (req.method === 'POST') req.pipe(res);
  else res.end('ok');
}

/** Sends one request and resolves with the response body and the milliseconds it took in all. */
function request(
  url: string,
  agent: http.Agent,
  body?: Buffer,
): Promise<{ status: number; body: Buffer; ms: number }> {
  const started = performance.now();
  const client = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(url, { agent, method: body === undefined ? 'GET' : 'POST' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks),
          ms: performance.now() - started,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Closes a server after dropping its idle kept-alive connections. */
function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/**
 * A delay is the subject, so only its floor is checked: a loaded machine adds time, never removes
 * it. That no more is charged than claimed shows in the connection count (one connection: one
 * handshake) and in the zero-delay test, which runs with timers that never fire.
 */
function atLeast(ms: number, min: number, what: string): void {
  assert.ok(ms >= min, `${what} took ${ms.toFixed(1)} ms, expected at least ${min}`);
}

describe('startDelayLink over plain HTTP', () => {
  let server: http.Server;
  let port: number;

  before(async () => {
    server = http.createServer(handler);
    port = await listen(server);
  });
  after(() => closeServer(server));

  it('charges a new connection two round trips and a kept-alive one one', async () => {
    const link = await startDelayLink({ target: { host: '127.0.0.1', port }, rttMs: 100 });
    const agent = new http.Agent({ keepAlive: true });
    try {
      const url = `http://${link.host}:${link.port}/`;
      const first = await request(url, agent);
      assert.equal(first.body.toString(), 'ok');
      const second = await request(url, agent);
      assert.equal(second.body.toString(), 'ok');
      console.log(`http rtt=100: first ${first.ms.toFixed(1)} ms, kept-alive ${second.ms.toFixed(1)} ms`);
      atLeast(first.ms, 200, 'first request');
      atLeast(second.ms, 100, 'kept-alive request');
      assert.equal(link.connections, 1, 'the second request was charged no handshake');
    } finally {
      agent.destroy();
      await link.close();
    }
  });

  it('adds nothing at rttMs 0: no byte waits for a timer', async (t) => {
    const link = await startDelayLink({ target: { host: '127.0.0.1', port }, rttMs: 0 });
    const agent = new http.Agent({ keepAlive: true });
    // Timers that never fire unless told: a link that held a byte for one would never answer.
    t.mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const url = `http://${link.host}:${link.port}/`;
      assert.equal((await request(url, agent)).body.toString(), 'ok');
      assert.equal((await request(url, agent)).body.toString(), 'ok');
    } finally {
      t.mock.timers.reset();
      agent.destroy();
      await link.close();
    }
  });

  it('carries a 5 MB body both ways byte for byte', async () => {
    const link = await startDelayLink({ target: { host: '127.0.0.1', port }, rttMs: 20 });
    const agent = new http.Agent({ keepAlive: true });
    try {
      const bytes = crypto.randomBytes(5 * 1024 * 1024);
      const echoed = await request(`http://${link.host}:${link.port}/`, agent, bytes);
      console.log(`http rtt=20: 5 MB echoed in ${echoed.ms.toFixed(1)} ms`);
      assert.equal(echoed.status, 200);
      assert.equal(echoed.body.length, bytes.length);
      assert.ok(echoed.body.equals(bytes), 'echoed body differs');
    } finally {
      agent.destroy();
      await link.close();
    }
  });
});

describe('startDelayLink over TLS', () => {
  let server: https.Server;
  let port: number;
  let ca: string;

  before(async () => {
    const cert = makeCertificate();
    ca = cert.cert;
    server = https.createServer({ key: cert.key, cert: cert.cert }, handler);
    port = await listen(server);
  });
  after(() => closeServer(server));

  it('charges the TLS handshake its real round trip', async () => {
    const link = await startDelayLink({ target: { host: '127.0.0.1', port }, rttMs: 100 });
    const agent = new https.Agent({ keepAlive: true, ca });
    try {
      const url = `https://${link.host}:${link.port}/`;
      const first = await request(url, agent);
      assert.equal(first.body.toString(), 'ok');
      const second = await request(url, agent);
      assert.equal(second.body.toString(), 'ok');
      console.log(`https rtt=100: first ${first.ms.toFixed(1)} ms, kept-alive ${second.ms.toFixed(1)} ms`);
      // TCP handshake, TLS 1.3 handshake, then the request: three round trips.
      atLeast(first.ms, 300, 'first request');
      atLeast(second.ms, 100, 'kept-alive request');
      assert.equal(link.connections, 1, 'the second request was charged no handshake');
    } finally {
      agent.destroy();
      await link.close();
    }
  });
});

describe('startDelayLink connections', () => {
  it('passes a half-close through after the bytes sent before it', async () => {
    // Answers only once the client has finished sending, which a relay that dropped FINs would hang.
    const echo = net.createServer({ allowHalfOpen: true }, (socket) => {
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('end', () => socket.end(Buffer.concat(chunks).toString().toUpperCase()));
    });
    const port = await listen(echo);
    const link = await startDelayLink({ target: { host: '127.0.0.1', port }, rttMs: 20 });
    try {
      const socket = net.connect({ host: link.host, port: link.port, allowHalfOpen: true });
      socket.write('hello ');
      socket.end('world');
      let reply = '';
      socket.setEncoding('utf8').on('data', (d: string) => (reply += d));
      await once(socket, 'end');
      assert.equal(reply, 'HELLO WORLD');
      await once(socket, 'close');
    } finally {
      await link.close();
      echo.close();
    }
  });

  it('resets the client when the target refuses the connection', async () => {
    const closed = net.createServer();
    const port = await listen(closed);
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const link = await startDelayLink({ target: { host: '127.0.0.1', port }, rttMs: 20 });
    try {
      const socket = net.connect({ host: link.host, port: link.port });
      socket.on('error', () => {});
      const [hadError] = (await once(socket, 'close')) as [boolean];
      assert.ok(socket.destroyed, `closed with hadError=${hadError}`);
    } finally {
      await link.close();
    }
  });

  it('ends open connections on close', async () => {
    const upstreamClosed: Promise<unknown>[] = [];
    let bothUp: () => void;
    const up = new Promise<void>((resolve) => (bothUp = resolve));
    const target = net.createServer((socket) => {
      socket.on('error', () => {});
      // 'close' whether or not a reset came first (events.once would reject on the 'error').
      upstreamClosed.push(new Promise((resolve) => socket.once('close', resolve)));
      socket.resume();
      if (upstreamClosed.length === 2) bothUp();
    });
    const port = await listen(target);
    const link = await startDelayLink({ target: { host: '127.0.0.1', port }, rttMs: 20 });
    try {
      const sockets = [0, 1].map(() => net.connect({ host: link.host, port: link.port }));
      for (const socket of sockets) {
        socket.on('error', () => {});
        socket.write('hi');
      }
      // Both relayed connections must be up at the target before the link goes.
      await up;
      assert.equal(link.connections, 2);
      const clientsClosed = sockets.map((socket) => new Promise((resolve) => socket.once('close', resolve)));
      // Both ends of both connections close: were one left open, this would wait for ever.
      await link.close();
      await Promise.all([...clientsClosed, ...upstreamClosed]);
    } finally {
      await link.close(); // a no-op unless the test failed before closing
      await new Promise<void>((resolve) => target.close(() => resolve()));
    }
  });
});
