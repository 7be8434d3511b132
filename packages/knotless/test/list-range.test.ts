import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { layoutOf } from './helpers/ref-packs.ts';

const t = useNetwork(['alice.test']);
// Its repositories are on ref records (KNOTLESS_REF_TABLE=0), whose listing its cases script, hold
// and count; the last cases put them on a ref table, the default layout (`layout`), read whole at once.
let layout: 'records' | 'table' = 'records';
let proxy: Proxy | undefined;
/** A PDS front that answers descending listings in ascending order (see the last test). */
let unordered: string | undefined;
let viaProxy: 'proxy' | 'unordered' | false = false;
// Read when each process starts: a process started through the proxy stays on it.
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: layout === 'table' ? '1' : '0',
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT: '0',
  ...(viaProxy === 'proxy' && proxy !== undefined ? { KNOTLESS_SERVICE: proxy.url } : {}),
  ...(viaProxy === 'unordered' && unordered !== undefined ? { KNOTLESS_SERVICE: unordered } : {}),
}));
const makeRepo = repoMaker(alice, 'alice.test', 'range');
/** A new repository, checked to be on the layout its case runs on. */
async function createRepo(): Promise<string> {
  const url = await makeRepo();
  assert.equal(await layoutOf(t, 'alice.test', url.split('/').pop()!), layout);
  return url;
}

/** The next request `hold` picks is held at the proxy, `held` told, until `release` settles. */
let hold: ((path: string) => boolean) | undefined;
let held: (() => void) | undefined;
let release: Promise<void> = Promise.resolve();

before(async () => {
  await t.ready;
  proxy = await startProxy({
    target: t.net.pdsUrl,
    onRequest: async (req) => {
      if (hold === undefined || !hold(req.path)) return;
      hold = undefined;
      held?.();
      await release;
    },
  });
});
after(() => proxy?.close());

// A server that answers a descending listing with an ascending page from the middle of the range
// (whatever the cursor). Everything else goes to the PDS as is.
before(async () => {
  await t.ready;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', t.net.pdsUrl);
    const cursor = url.searchParams.get('cursor');
    if (url.pathname.endsWith('/com.atproto.repo.listRecords') && !url.searchParams.has('reverse')) {
      // Ascending from the middle of the repository's refs (b200 on), whatever was asked.
      url.searchParams.set('cursor', `${cursor?.slice(0, cursor.indexOf('~') + 1)}refs_heads_b2`);
      url.searchParams.set('reverse', 'true');
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k)),
      ) as Record<string, string>;
      const body = chunks.length === 0 ? undefined : Buffer.concat(chunks);
      fetch(url, { method: req.method ?? 'GET', headers, ...(body === undefined ? {} : { body }) })
        .then(async (up) => {
          const answer = Buffer.from(await up.arrayBuffer());
          res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
          res.end(answer);
        })
        .catch((err: unknown) => res.writeHead(502).end(String(err)));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  unordered = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  after(() => server.close());
});

const isListing = (p: string) => p.startsWith('/xrpc/com.atproto.repo.listRecords?');
const isTableRead = (p: string) => p.startsWith('/xrpc/com.atproto.sync.getRecord?');
const descending = (p: string) => isListing(p) && !p.includes('reverse=true');

const BRANCHES = 450;
const names = Array.from({ length: BRANCHES }, (_, i) => `b${String(i).padStart(3, '0')}`);

/** A repository with 450 branches and main (and HEAD: 452 records), and its first clone. */
async function manyBranches(): Promise<{ url: string; dir: string }> {
  const url = await createRepo();
  const dir = await newRepo(alice, url);
  await commitFiles(alice, dir, { a: '1' }, 'one');
  for (const b of names) await alice.ok(dir, 'branch', b);
  await alice.ok(dir, 'push', '-q', 'origin', 'main', ...names);
  return { url, dir };
}

/** Runs a git command of this machine with its PDS requests through the proxy. */
function throughProxy<T>(run: () => Promise<T>, via: 'proxy' | 'unordered' = 'proxy'): Promise<T> {
  viaProxy = via;
  const started = run();
  viaProxy = false;
  return started;
}

describe('listing many refs from both ends', () => {
  it('lists every ref once: the first page one way, the rest from both ends', async () => {
    const { url, dir } = await manyBranches();
    proxy!.reset();
    assertEveryRefOnce(await throughProxy(() => alice.ok(dir, 'ls-remote', url)));
    const listings = proxy!.requests.filter((r) => isListing(r.path));
    assert.ok(!descending(listings[0]!.path), 'the first page is not the ascending one');
    assert.ok(
      listings.some((r) => descending(r.path)),
      'nothing was read from the top down',
    );
    // 452 records are five pages one way; from both ends, at most one more.
    assert.ok(listings.length <= 6, `${listings.length} pages`);

    // A repository of up to 100 refs still costs one request.
    const small = await createRepo();
    const sdir = await newRepo(alice, small);
    await commitFiles(alice, sdir, { a: '1' }, 'one');
    await alice.ok(sdir, 'push', '-q', 'origin', 'main');
    proxy!.reset();
    await throughProxy(() => alice.ok(sdir, 'ls-remote', small));
    assert.equal(proxy!.count('com.atproto.repo.listRecords'), 1);
  });

  it('a push never overwrites refs another machine moved while its listing ran', () =>
    movedMeanwhile(descending));

  it('a server that does not list downwards costs the one-way time, never a ref', async () => {
    const { url, dir } = await manyBranches();
    const listed = await throughProxy(() => alice.ok(dir, 'ls-remote', url), 'unordered');
    assertEveryRefOnce(listed);
  });
});

describe('many refs on a ref table (the default layout)', () => {
  before(() => {
    layout = 'table';
  });
  after(() => {
    layout = 'records';
  });

  it('lists every ref once, in one verified read of the table', async () => {
    const { url, dir } = await manyBranches();
    proxy!.reset();
    assertEveryRefOnce(await throughProxy(() => alice.ok(dir, 'ls-remote', url)));
    assert.equal(proxy!.count('com.atproto.sync.getRecord'), 1);
  });

  it('a push never overwrites refs another machine moved while its read of the table ran', () =>
    movedMeanwhile(isTableRead));
});

/** Asserts that an ls-remote listed each ref of {@link manyBranches} exactly once. */
function assertEveryRefOnce(listed: string): void {
  const refs = listed
    .trim()
    .split('\n')
    .map((l) => l.split('\t')[1]!);
  assert.equal(new Set(refs).size, refs.length, 'a ref was listed twice');
  assert.deepEqual(
    refs.filter((r) => r.startsWith('refs/heads/')).sort(),
    ['main', ...names].map((n) => `refs/heads/${n}`).sort(),
  );
}

/**
 * A push whose read of the refs (the request `picks` chooses) is held while another machine moves the
 * two refs it pushes, one of the first page and one of the last: neither is overwritten.
 */
async function movedMeanwhile(picks: (path: string) => boolean): Promise<void> {
  const { url, dir } = await manyBranches();
  const other = alice.dir();
  await alice.ok(other, 'clone', '-q', url, 'o');
  const o = `${other}/o`;
  // This machine's new commit on a ref of the first page (b000) and one of the last (b449).
  await commitFiles(alice, dir, { mine: '1' }, 'mine');
  for (const b of ['b000', 'b449']) await alice.ok(dir, 'branch', '-f', b, 'HEAD');
  // Its push reads through the proxy, which holds the request `picks` (on ref records, the first
  // page read from the top).
  let letGo!: () => void;
  release = new Promise<void>((r) => (letGo = r));
  const holding = new Promise<void>((r) => (held = r));
  hold = picks;
  const pushing = throughProxy(() => alice.git(dir, 'push', 'origin', 'b000', 'b449'));
  await holding;
  // Meanwhile the other machine moves both: b000 was listed already, b449 not yet.
  await commitFiles(alice, o, { theirs: '1' }, 'theirs');
  for (const b of ['b000', 'b449']) await alice.ok(o, 'branch', '-f', b, 'HEAD');
  await alice.ok(o, 'push', '-q', 'origin', 'b000', 'b449');
  letGo();
  const push = await pushing;
  assert.notEqual(push.code, 0, push.stderr);
  // b000 was listed before it moved: the compare-and-swap refuses it. b449 was listed after:
  // git itself sees that it is not a fast-forward. A table read before both moved: its swap is
  // refused, and each ref decided again is no fast-forward.
  assert.match(push.stderr, /b000 -> b000 \(fetch first\)/);
  assert.match(push.stderr, /b449 -> b449 \((fetch first|non-fast-forward)\)/);
  const theirs = (await alice.ok(o, 'rev-parse', 'b000')).trim();
  const remote = await alice.ok(dir, 'ls-remote', url, 'refs/heads/b000', 'refs/heads/b449');
  assert.deepEqual(
    remote
      .trim()
      .split('\n')
      .map((l) => l.split('\t')[0]),
    [theirs, theirs],
  );
}
