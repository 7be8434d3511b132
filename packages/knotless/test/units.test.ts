import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { AgentClient } from '../src/agent/client.ts';
import { SessionStore } from '../src/auth/store.ts';
import { NESTED_MARKER, readConfig } from 'knotless-core/config/env';
import { shellQuote } from '../../knotless-devnet/src/dev/env-file.ts';
import { isKnotlessError } from 'knotless-core/errors';
import { readJson } from 'knotless-core/fsutil';
import { IdentityCache } from 'knotless-core/identity/cache';
import { isValidRepoName, parseRepoSpec } from 'knotless-core/records/name';

describe('repository names', () => {
  it('parses [handle/]name', () => {
    assert.deepEqual(parseRepoSpec('hello'), { owner: undefined, name: 'hello' });
    assert.deepEqual(parseRepoSpec('alice.test/hello'), { owner: 'alice.test', name: 'hello' });
    assert.deepEqual(parseRepoSpec('did:plc:abc/x.y'), { owner: 'did:plc:abc', name: 'x.y' });
    assert.throws(
      () => parseRepoSpec('/x'),
      (e) => isKnotlessError(e, 'usage'),
    );
    assert.throws(
      () => parseRepoSpec('alice.test/..'),
      (e) => isKnotlessError(e, 'invalid-name'),
    );
  });

  it('accepts exactly the documented characters', () => {
    for (let c = 0; c < 0x250; c++) {
      const ch = String.fromCodePoint(c);
      assert.equal(isValidRepoName(`a${ch}b`), /^[A-Za-z0-9._-]$/.test(ch), `character U+${c.toString(16)}`);
    }
    assert.equal(isValidRepoName('a.GIT'), false);
  });
});

describe('shellQuote', () => {
  it('round-trips through a real shell', () => {
    for (const v of ['plain', "it's", 'a b', '$HOME', '`x`', "'';\\\n", '']) {
      const out = execFileSync('/bin/sh', ['-c', `printf %s ${shellQuote(v)}`], { encoding: 'utf8' });
      assert.equal(out, v);
    }
  });
});

describe('identity cache', () => {
  it('serves entries while fresh and forgets them after the TTL or on request', (t) => {
    // The clock is the test's: a TTL is about time passing, not about how fast this machine is.
    t.mock.timers.enable({ apis: ['Date'], now: 1_700_000_000_000 });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-cache-'));
    const id = { did: 'did:plc:abc', handle: 'Alice.Test', pds: 'https://pds.example' };
    const cache = new IdentityCache(dir, 3600);
    cache.put(id);
    assert.deepEqual(cache.handle('alice.test'), id);
    assert.deepEqual(cache.did('did:plc:abc'), id);
    assert.equal(fs.statSync(path.join(dir, 'identity.json')).mode & 0o777, 0o600);
    cache.forget('alice.test');
    assert.equal(cache.did('did:plc:abc'), undefined);

    const short = new IdentityCache(dir, 0.05);
    short.put(id);
    assert.deepEqual(short.did('did:plc:abc'), id);
    t.mock.timers.tick(49);
    assert.deepEqual(short.did('did:plc:abc'), id, 'fresh until the TTL has passed');
    t.mock.timers.tick(1);
    assert.equal(short.did('did:plc:abc'), undefined);
    assert.equal(short.handle('alice.test'), undefined);
    fs.rmSync(dir, { recursive: true });
  });

  it('trusts a handle only while its DID entry names it back, and ignores files of older versions', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-cache-'));
    const cache = new IdentityCache(dir, 3600);
    cache.put({ did: 'did:plc:abc', handle: 'alice.test', pds: 'https://a.example' });
    // The DID re-resolved without a verified handle: the old pair no longer counts.
    cache.put({ did: 'did:plc:abc', handle: undefined, pds: 'https://a.example' });
    assert.equal(cache.handle('alice.test'), undefined);
    // The handle moved to another DID: the DID that held it loses it.
    cache.put({ did: 'did:plc:abc', handle: 'alice.test', pds: 'https://a.example' });
    cache.put({ did: 'did:plc:new', handle: 'alice.test', pds: 'https://b.example' });
    assert.equal(cache.handle('alice.test')?.did, 'did:plc:new');
    assert.equal(cache.did('did:plc:abc')?.handle, undefined);
    // A file without the version (written when claimed handles were trusted) is read as empty.
    const at = Date.now();
    const old = {
      handles: { 'alice.test': { value: 'did:plc:evil', at } },
      dids: {
        'did:plc:evil': { value: { did: 'did:plc:evil', handle: 'alice.test', pds: 'https://e' }, at },
      },
    };
    fs.writeFileSync(path.join(dir, 'identity.json'), JSON.stringify(old));
    assert.equal(cache.handle('alice.test'), undefined);
    assert.equal(cache.did('did:plc:evil'), undefined);
    fs.rmSync(dir, { recursive: true });
  });
});

describe('configuration', () => {
  it('reads the agent settings and the nesting marker from the environment it is given', () => {
    const base = { HOME: '/home/x', KNOTLESS_CACHE_DIR: '/c' };
    const plain = readConfig(base);
    assert.equal(plain.agent, true);
    // No socket set by hand: the agent's private directory in the cache, and ten minutes' idle time.
    assert.equal(plain.agentSocket, undefined);
    assert.equal(plain.agentDir, path.join('/c', 'agent'));
    assert.equal(plain.agentIdleMs, 600_000);
    assert.equal(readConfig({ ...base, KNOTLESS_AGENT_IDLE: '2.5' }).agentIdleMs, 2500);
    assert.equal(readConfig({ ...base, KNOTLESS_AGENT_IDLE: '0' }).agentIdleMs, 0);
    assert.equal(readConfig({ ...base, KNOTLESS_AGENT_IDLE: 'soon' }).agentIdleMs, 600_000);
    assert.equal(plain.nested, false);
    for (const off of ['0', 'false', 'no', 'OFF'])
      assert.equal(readConfig({ ...base, KNOTLESS_AGENT: off }).agent, false);
    assert.equal(readConfig({ ...base, KNOTLESS_AGENT: '1' }).agent, true);
    assert.equal(readConfig({ ...base, KNOTLESS_AGENT_SOCKET: '/s/a.sock' }).agentSocket, '/s/a.sock');
    assert.equal(readConfig({ ...base, KNOTLESS_AGENT_SOCKET: '' }).agentSocket, undefined);
    assert.equal(readConfig({ ...base, [NESTED_MARKER]: '1' }).nested, true);
    // HOME comes from the environment given, not from the process's.
    assert.equal(readConfig({ HOME: '/home/y' }).cacheDir, path.join('/home/y', '.cache', 'knotless'));
  });

  it('is the only reader of the environment: other modules take a Config (the whole environment may be passed on)', () => {
    const packages = path.join(import.meta.dirname, '..', '..');
    const readers: string[] = [];
    for (const src of ['knotless/src', 'knotless-core/src'].map((p) => path.join(packages, p))) {
      for (const file of fs.readdirSync(src, { recursive: true, encoding: 'utf8' })) {
        if (!file.endsWith('.ts') || file === path.join('config', 'env.ts')) continue;
        const text = fs.readFileSync(path.join(src, file), 'utf8');
        // Passing the whole environment on (to a child, to the agent for a thin helper's session, as
        // the caller's) is not reading a variable; `process.env.X`, `env['X']` and `(… ?? process.env)['X']` are.
        const reads = text.match(/process\.env\s*(\.|\[)|\benv\)?\[\s*['"`]/g);
        if (reads !== null) readers.push(`${file}: ${reads.join(', ')}`);
      }
    }
    assert.deepEqual(readers, []);
  });
});

describe('agent client', () => {
  /** A stand-in agent on a Unix socket that answers every request with `status` and `body`. */
  async function fakeAgent(
    status: number,
    body: string,
  ): Promise<{ socket: string; close(): Promise<void> }> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-agent-'));
    const socket = path.join(dir, 'agent.sock');
    const server = http.createServer((_req, res) => res.writeHead(status).end(body));
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    return {
      socket,
      close: async () => {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
        fs.rmSync(dir, { recursive: true, force: true });
      },
    };
  }

  it('falls back (undefined) only when the agent has gone', async () => {
    const agent = await fakeAgent(200, JSON.stringify({ confirmed: false }));
    const client = AgentClient.find(agent.socket, 5000)!;
    assert.ok(client !== undefined);
    assert.equal(await client.view('did:plc:a', 'r', 'https://pds.test'), undefined);
    assert.equal(client.alive, true);
    await agent.close();
    // Its socket removed: the one failure that means "list directly", and "nothing to tell".
    assert.equal(await client.view('did:plc:a', 'r', 'https://pds.test'), undefined);
    assert.equal(client.alive, false);
    await client.wrote('did:plc:a', 'r', { invalidate: true });
    client.transport({ request: () => Promise.reject(new Error('unused')), close: () => {} }).close();
  });

  it('surfaces an agent that is there but answers wrongly, instead of listing as if it were not', async () => {
    for (const [status, body, pattern] of [
      [500, '{"error":"AgentForwardFailed"}', /answered \/view with status 500/],
      [200, 'not json', SyntaxError],
    ] as const) {
      const agent = await fakeAgent(status, body);
      const client = AgentClient.find(agent.socket, 5000)!;
      try {
        await assert.rejects(client.view('did:plc:a', 'r', 'https://pds.test'), pattern);
        await assert.rejects(
          client.wrote('did:plc:a', 'r', { invalidate: true }),
          /answered \/wrote with status/,
        );
        assert.equal(client.alive, true);
      } finally {
        client.transport({ request: () => Promise.reject(new Error('unused')), close: () => {} }).close();
        await agent.close();
      }
    }
  });
});

describe('reading local files', () => {
  it('counts only a missing file (or one that is not JSON) as absent; any other failure surfaces', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-read-'));
    try {
      assert.equal(readJson(path.join(dir, 'none.json')), undefined);
      fs.writeFileSync(path.join(dir, 'bad.json'), '{"half');
      assert.equal(readJson(path.join(dir, 'bad.json')), undefined);
      // A directory where the file should be is not "no file": reading it fails, and says so.
      fs.mkdirSync(path.join(dir, 'dir.json'));
      assert.throws(() => readJson(path.join(dir, 'dir.json')), { code: 'EISDIR' });
      const store = new SessionStore(dir);
      assert.equal(store.current(), undefined);
      assert.deepEqual(store.list(), []);
      fs.mkdirSync(path.join(dir, 'current'));
      assert.throws(() => store.current(), { code: 'EISDIR' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('ipLiteral (the TLS server name rule)', () => {
  it('agrees with net.isIP on every hostname a URL parser gives', async () => {
    const { ipLiteral } = await import('knotless-core/xrpc/http-pool');
    const net = await import('node:net');
    const urls = [
      'https://127.0.0.1/',
      'https://127.1/',
      'https://0x7f.0.0.1/',
      'https://[::1]:8443/',
      'https://[fe80::1]/',
      'https://[::ffff:1.2.3.4]/',
      'https://localhost/',
      'https://pds.example/',
      'https://1.2.3.4.nip.io/',
      'https://xn--bcher-kva.example/',
      'https://a-1.b-2.example:443/',
    ];
    for (const u of urls) {
      const host = new URL(u).hostname.replace(/^\[(.*)\]$/, '$1');
      assert.equal(ipLiteral(host), net.isIP(host) !== 0, u);
    }
  });
});
