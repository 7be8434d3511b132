// The world every fault case runs in: one network, a fault-injecting proxy in front of its PDS, and
// alice, whose every request goes through the proxy. Cases script faults on the proxy, set a crash
// point for the next command, or write hostile records straight to the PDS with alice's session.
import assert from 'node:assert/strict';
import { before, after } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { useGitUser, type GitUser } from '../helpers/git.ts';
import { useNetwork, type TestNet } from '../helpers/network.ts';
import { layoutOf } from '../helpers/ref-packs.ts';

/** What a fault case gets to work with. */
export interface FaultEnv {
  t: TestNet;
  alice: GitUser;
  proxy: Proxy;
  /**
   * Creates a fresh repository (on ref records, or on a ref table inside {@link FaultEnv.onTable});
   * returns its name and URL.
   */
  repo(prefix: string): Promise<{ name: string; url: string }>;
  /**
   * Runs `fn` with every process it starts on the default layout (KNOTLESS_REF_TABLE on): the
   * repositories it creates start on a ref table, and each is checked, once `fn` ends, to be on its
   * table still with no ref record written beside it. Returns what `fn` returned, or the layout found.
   */
  onTable(fn: () => Promise<string>): Promise<string>;
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
  // Its repositories stay on ref records (KNOTLESS_REF_TABLE=0): the requests most cases script, hold
  // or count are those of ref records, and old repositories on them exist. The cases of the default
  // layout, a repository on its ref table, run inside env.onTable (checks.ts, onTable).
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
  // The repositories created inside onTable, whose layout it checks when its case ends.
  let onTableRepos: string[] | undefined;
  const env: FaultEnv = {
    t,
    alice,
    proxy: undefined as unknown as Proxy,
    did: '',
    async repo(prefix) {
      const name = `${prefix}-${++n}`;
      const res = await alice.knotless('repo', 'create', name);
      assert.equal(res.code, 0, res.stderr);
      if (onTableRepos !== undefined) {
        // The case is worth nothing unless its repository really is on a table.
        assert.ok(await tableOf(name), `${name} was created without its ref table`);
        onTableRepos.push(name);
      }
      return { name, url: `knotless://alice.test/${name}` };
    },
    async onTable(fn) {
      const saved = onTableRepos;
      onTableRepos = [];
      try {
        const observed = await env.withEnv({ KNOTLESS_REF_TABLE: '1' }, fn);
        const wrong: string[] = [];
        for (const name of onTableRepos) {
          if (!(await tableOf(name))) wrong.push(`${name} lost its ref table`);
          const records = await refRecordsOf(name);
          if (records > 0) wrong.push(`${name} has ${records} ref records beside its table`);
        }
        return wrong.length === 0 ? observed : `${observed}; ${wrong.join('; ')}`;
      } finally {
        onTableRepos = saved;
      }
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
  const tableOf = async (name: string) => (await layoutOf(t, 'alice.test', name)) === 'table';
  /** How many `dev.knotless.ref` records of `name` the PDS holds (keys `<name>~…`, contiguous). */
  async function refRecordsOf(name: string): Promise<number> {
    let count = 0;
    let cursor: string | undefined;
    for (;;) {
      const q = new URLSearchParams({ repo: env.did, collection: 'dev.knotless.ref', limit: '100' });
      if (cursor !== undefined) q.set('cursor', cursor);
      const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.listRecords?${q.toString()}`);
      assert.ok(res.ok, `listRecords: ${res.status}`);
      const page = (await res.json()) as { records: { uri: string }[]; cursor?: string };
      count += page.records.filter((r) => r.uri.split('/').pop()!.startsWith(`${name}~`)).length;
      if (page.cursor === undefined || page.records.length === 0) return count;
      cursor = page.cursor;
    }
  }
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
