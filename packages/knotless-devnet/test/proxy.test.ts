import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { startNetwork, type Network } from '../src/network.ts';
import { freePort } from '../src/ports.ts';
import { startProxy, type Proxy, type ProxyRequest } from '../src/proxy.ts';

/** GETs a url through a given agent, so a test controls which connection carries it. */
function get(url: string, agent: http.Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

describe('startProxy', () => {
  let net: Network;
  let proxy: Proxy;
  const handle = 'forwarded.test';
  const password = 'proxy-test-password';

  before(async () => {
    net = await startNetwork();
    proxy = await startProxy({ target: net.pdsUrl });
    await net.ensureAccount(handle, password);
  });
  after(async () => {
    await proxy?.close();
    await net?.close();
  });

  it('forwards a GET and logs it', async () => {
    proxy.reset();
    const res = await fetch(`${proxy.url}/xrpc/com.atproto.server.describeServer`);
    assert.equal(res.status, 200);
    const text = await res.text();
    const body = JSON.parse(text) as { did: string };
    assert.match(body.did, /^did:/);
    assert.equal(proxy.count(), 1);
    assert.equal(proxy.count('com.atproto.server.describeServer'), 1);
    assert.deepEqual(proxy.requests[0], {
      method: 'GET',
      path: '/xrpc/com.atproto.server.describeServer',
      nsid: 'com.atproto.server.describeServer',
      status: 200,
      connection: proxy.requests[0]?.connection,
      // A read costs no write points.
      points: 0,
      bytes: Buffer.byteLength(text),
    });
    assert.ok((proxy.requests[0]?.connection ?? 0) > 0);
  });

  it('forwards a session, a 3 MB blob upload and its download byte for byte', async () => {
    proxy.reset();
    const session = await fetch(`${proxy.url}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: handle, password }),
    });
    assert.equal(session.status, 200);
    const { accessJwt, did } = (await session.json()) as { accessJwt: string; did: string };
    const auth = { authorization: `Bearer ${accessJwt}` };

    const bytes = crypto.randomBytes(3 * 1024 * 1024);
    const upload = await fetch(`${proxy.url}/xrpc/com.atproto.repo.uploadBlob`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/octet-stream' },
      body: bytes,
    });
    assert.equal(upload.status, 200, await upload.clone().text());
    const { blob } = (await upload.json()) as { blob: { ref: { $link: string }; size: number } };
    assert.equal(blob.size, bytes.length);

    // The PDS serves only blobs a record references; until then they sit in temporary storage.
    const record = await fetch(`${proxy.url}/xrpc/com.atproto.repo.createRecord`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        repo: did,
        collection: 'dev.knotless.test.blobHolder',
        validate: false,
        record: { $type: 'dev.knotless.test.blobHolder', file: { $type: 'blob', ...blob } },
      }),
    });
    assert.equal(record.status, 200, await record.clone().text());

    const cid = blob.ref.$link;
    // Uncompressed, so that the bytes the proxy counts on the wire are the blob's own.
    const download = await fetch(`${proxy.url}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`, {
      headers: { 'accept-encoding': 'identity' },
    });
    assert.equal(download.status, 200);
    assert.ok(Buffer.from(await download.arrayBuffer()).equals(bytes), 'downloaded blob differs');

    assert.equal(proxy.count(), 4);
    for (const nsid of [
      'com.atproto.server.createSession',
      'com.atproto.repo.uploadBlob',
      'com.atproto.repo.createRecord',
      'com.atproto.sync.getBlob',
    ]) {
      assert.equal(proxy.count(nsid), 1, nsid);
    }
    assert.equal(proxy.count('com.atproto.server.describeServer'), 0);
    const getBlob = proxy.requests.find((r) => r.nsid === 'com.atproto.sync.getBlob');
    assert.equal(getBlob?.path, `/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${cid}`);
    assert.equal(getBlob?.status, 200);
    // What a download cost: the answer's body, counted as it passed.
    assert.equal(proxy.bytes('com.atproto.sync.getBlob'), bytes.length);
    assert.ok(proxy.bytes() > bytes.length);
  });

  it('counts two requests on one keep-alive connection as one connection', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      proxy.reset();
      const url = `${proxy.url}/xrpc/com.atproto.server.describeServer`;
      assert.equal((await get(url, agent)).status, 200);
      assert.equal((await get(url, agent)).status, 200);
      assert.equal(proxy.connections, 1);
      assert.equal(proxy.count('com.atproto.server.describeServer'), 2);
      assert.equal(proxy.requests[0]?.connection, proxy.requests[1]?.connection);

      // A second client is a second connection, with a new id.
      const other = new http.Agent({ keepAlive: true });
      assert.equal((await get(url, other)).status, 200);
      other.destroy();
      assert.equal(proxy.connections, 2);
      assert.notEqual(proxy.requests[2]?.connection, proxy.requests[0]?.connection);
    } finally {
      agent.destroy();
    }
  });

  it('reset clears the log and the connection count', async () => {
    await fetch(`${proxy.url}/xrpc/com.atproto.server.describeServer`);
    assert.ok(proxy.count() > 0);
    const requests = proxy.requests;
    proxy.reset();
    assert.equal(proxy.count(), 0);
    assert.equal(proxy.count('com.atproto.server.describeServer'), 0);
    assert.equal(proxy.connections, 0);
    assert.equal(proxy.requests, requests, 'reset empties the same array');
    assert.equal(requests.length, 0);
  });

  it('awaits onRequest before forwarding, and answers 500 when it throws', async () => {
    const seen: ProxyRequest[] = [];
    const hooked = await startProxy({
      target: net.pdsUrl,
      onRequest: async (req) => {
        seen.push(req);
        await new Promise((resolve) => setTimeout(resolve, 10));
        if (req.nsid === 'com.atproto.server.createSession') throw new Error('injected');
      },
    });
    try {
      const ok = await fetch(`${hooked.url}/xrpc/com.atproto.server.describeServer?x=1`);
      assert.equal(ok.status, 200);
      await ok.arrayBuffer();
      assert.deepEqual(seen, [
        {
          method: 'GET',
          path: '/xrpc/com.atproto.server.describeServer?x=1',
          nsid: 'com.atproto.server.describeServer',
        },
      ]);
      const failed = await fetch(`${hooked.url}/xrpc/com.atproto.server.createSession`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: handle, password }),
      });
      assert.equal(failed.status, 500);
      assert.deepEqual(await failed.json(), { error: 'ProxyHookFailed', message: 'injected' });
      assert.equal(hooked.requests[1]?.status, 500);
    } finally {
      await hooked.close();
    }
  });

  it('answers 502 when the target is unreachable', async () => {
    const port = await freePort();
    const dead = await startProxy({ target: `http://127.0.0.1:${port}` });
    try {
      const res = await fetch(`${dead.url}/xrpc/com.atproto.server.describeServer`);
      assert.equal(res.status, 502);
      assert.match(res.headers.get('content-type') ?? '', /application\/json/);
      const body = (await res.json()) as { error: string; message: string };
      assert.equal(body.error, 'BadGateway');
      assert.equal(typeof body.message, 'string');
      assert.equal(dead.count('com.atproto.server.describeServer'), 1);
      assert.equal(dead.requests[0]?.status, 502);

      // A body the client is still sending must not wedge its keep-alive connection.
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const post = await new Promise<number>((resolve, reject) => {
          const req = http.request(`${dead.url}/xrpc/com.atproto.repo.uploadBlob`, { method: 'POST', agent });
          req.on('response', (r) => {
            r.resume();
            r.on('end', () => resolve(r.statusCode ?? 0));
          });
          req.on('error', reject);
          req.end(crypto.randomBytes(1024 * 1024));
        });
        assert.equal(post, 502);
        assert.equal((await get(`${dead.url}/xrpc/com.atproto.server.describeServer`, agent)).status, 502);
      } finally {
        agent.destroy();
      }
    } finally {
      await dead.close();
    }
  });

  it('tells which watched process sent a request, by who holds the connection, not by anything it says', async () => {
    const { spawn } = await import('node:child_process');
    let pids: number[] = [];
    const watching = await startProxy({ target: net.pdsUrl, watchPids: () => pids });
    try {
      const url = `${watching.url}/xrpc/com.atproto.server.describeServer`;
      // Another process, watched, waits for its go so that its pid is known before it connects.
      const child = spawn(
        process.execPath,
        [
          '-e',
          `process.stdin.once('data', () => fetch(${JSON.stringify(url)}).then((r) => r.text()).then(() => process.exit(0)))`,
        ],
        { stdio: ['pipe', 'ignore', 'inherit'] },
      );
      pids = [child.pid!];
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin.write('go\n');
      assert.equal(await exited, 0);
      // This process, not watched, on a fresh connection.
      const mine = new http.Agent({ keepAlive: false });
      assert.equal((await get(url, mine)).status, 200);
      mine.destroy();
      assert.deepEqual(
        watching.requests.map((r) => r.pid),
        [child.pid, undefined],
      );
    } finally {
      await watching.close();
    }
  });
});
