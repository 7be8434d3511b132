// The world every fault case runs in: one network, a fault-injecting proxy in front of its PDS, and
// alice, whose every request goes through the proxy. Cases script faults on the proxy, set a crash
// point for the next command, or write hostile records straight to the PDS with alice's session.
import assert from 'node:assert/strict';
import { before, after } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { useGitUser, type GitUser } from '../helpers/git.ts';
import { useNetwork, type TestNet } from '../helpers/network.ts';

/** What a fault case gets to work with. */
export interface FaultEnv {
  t: TestNet;
  alice: GitUser;
  proxy: Proxy;
  /** Creates a fresh repository; returns its name and URL. */
  repo(prefix: string): Promise<{ name: string; url: string }>;
  /** Runs `fn` with KNOTLESS_CRASH_AT set for every knotless process it starts. */
  crashing<T>(point: string, fn: () => Promise<T>): Promise<T>;
  /** Runs `fn` with extra environment for every process it starts. */
  withEnv<T>(extra: Record<string, string>, fn: () => Promise<T>): Promise<T>;
  /** Alice's DID. */
  did: string;
  /** Calls an XRPC procedure on the PDS directly (not through the proxy) as alice. */
  pdsPost(nsid: string, body: unknown): Promise<unknown>;
  /** Reads a record straight from the PDS. */
  getRecord(collection: string, rkey: string): Promise<{ cid: string; value: Record<string, unknown> }>;
}

/** Sets up the fault world for the calling test file. */
export function useFaultEnv(): FaultEnv {
  const t = useNetwork(['alice.test']);
  // Its repositories stay on ref records (KNOTLESS_REF_TABLE=0): the requests its cases script, hold
  // or count are those of ref records.
  t.defaults['KNOTLESS_REF_TABLE'] = '0';
  let extra: Record<string, string> = {};
  let proxyUrl: string | undefined;
  const alice = useGitUser(t, 'alice.test', () => ({
    KNOTLESS_COMPACT: '0',
    // Backoff small enough that a case with five retries takes a fraction of a second.
    KNOTLESS_RETRY_BASE_MS: '20',
    KNOTLESS_RETRY_MAX_WAIT: '5',
    ...(proxyUrl === undefined ? {} : { KNOTLESS_SERVICE: proxyUrl }),
    ...extra,
  }));
  let jwt = '';
  let n = 0;
  const env: FaultEnv = {
    t,
    alice,
    proxy: undefined as unknown as Proxy,
    did: '',
    async repo(prefix) {
      const name = `${prefix}-${++n}`;
      const res = await alice.knotless('repo', 'create', name);
      assert.equal(res.code, 0, res.stderr);
      return { name, url: `knotless://alice.test/${name}` };
    },
    async crashing(point, fn) {
      return env.withEnv({ KNOTLESS_CRASH_AT: point }, fn);
    },
    async withEnv(more, fn) {
      const saved = extra;
      extra = { ...extra, ...more };
      try {
        return await fn();
      } finally {
        extra = saved;
      }
    },
    async pdsPost(nsid, body) {
      const res = await fetch(`${t.net.pdsUrl}/xrpc/${nsid}`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${jwt}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify(body),
      });
      const text = await res.text();
      assert.ok(res.ok, `${nsid}: ${res.status} ${text}`);
      return (text === '' ? undefined : JSON.parse(text)) as unknown;
    },
    async getRecord(collection, rkey) {
      const q = new URLSearchParams({ repo: env.did, collection, rkey });
      const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.getRecord?${q.toString()}`);
      assert.ok(res.ok, `getRecord ${rkey}: ${res.status}`);
      return (await res.json()) as { cid: string; value: Record<string, unknown> };
    },
  };
  before(async () => {
    await t.ready;
    env.proxy = await startProxy({ target: t.net.pdsUrl });
    proxyUrl = env.proxy.url;
    env.did = t.dids['alice.test']!;
    const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: 'alice.test', password: t.password }),
    });
    jwt = ((await res.json()) as { accessJwt: string }).accessJwt;
  });
  after(() => env.proxy?.close());
  return env;
}
