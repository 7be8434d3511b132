import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { putRaw } from './helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { readCar, readCommit, treeFrontier } from 'knotless-core/records/proof';

const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
/** The layout the test's repositories are made and pushed in: a ref table (the default), or ref records. */
let layout: Record<string, string> = {};
// Until the proxy is up (hooks of one file run concurrently) the user talks to the PDS directly.
const alice = useGitUser(t, 'alice.test', () => ({
  // Set as it was when a listing window existed: nothing may answer git from a cached view any more.
  KNOTLESS_LIST_WINDOW: '600',
  KNOTLESS_COMPACT: '0',
  ...layout,
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
});
after(() => proxy?.close());

/**
 * A cold listing: the ref records, and beside them the proof that the repository has no ref table
 * (format.md, "The ref table"; its key comes from the PLC directory, which this proxy does not see).
 */
const LISTING = ['com.atproto.repo.listRecords', 'com.atproto.sync.getRecord'];
/**
 * After a push's record writes, the table read again: a migration that created one meanwhile may
 * have missed them (format.md, "Old repositories").
 */
const CHECKED = 'com.atproto.sync.getRecord';

/**
 * The requests a reader makes to prove a listing of repository `name`'s ref records as the account
 * is now (format.md, "A listing of ref records, proved whole"), worked out here from the PDS itself:
 * from the proof of `rkey` in `collection` (the one the reader starts from), the proof of each end
 * of the repository's key range whose path that proof does not hold (a `getRecord` each, side by
 * side); every node left is then within the range, built from the listing with no request.
 */
async function walkOf(name: string, collection: string, rkey: string): Promise<string[]> {
  const did = t.dids['alice.test']!;
  const proof = async (collection: string, rkey: string) => {
    const url = new URL('/xrpc/com.atproto.sync.getRecord', t.net.pdsUrl);
    for (const [k, v] of Object.entries({ did, collection, rkey })) url.searchParams.append(k, v);
    const res = await fetch(url);
    assert.equal(res.status, 200, `${collection}/${rkey}`);
    return readCar(new Uint8Array(await res.arrayBuffer()));
  };
  const car = await proof(collection, rkey);
  const root = readCommit(car.blocks.get(car.root.toString())).data;
  const blocks = car.blocks;
  const lo = `dev.knotless.ref/${name}~`;
  const hi = `${lo}\x7f`;
  const out: string[] = [];
  const { holes } = treeFrontier(blocks, root, lo, hi);
  const ends = [
    ...(holes.some((h) => h.from === undefined || h.from.toString() < lo) ? [`${name}~`] : []),
    ...(holes.some((h) => h.to === undefined || h.to.toString() > hi) ? [`${name}~`.padEnd(512, '~')] : []),
  ];
  for (const end of ends) {
    out.push('com.atproto.sync.getRecord');
    for (const [cid, bytes] of (await proof('dev.knotless.ref', end)).blocks) blocks.set(cid, bytes);
  }
  for (const h of treeFrontier(blocks, root, lo, hi).holes)
    assert.ok(h.from !== undefined && h.from.toString() >= lo && h.to !== undefined && h.to.toString() <= hi);
  return out;
}

/**
 * A cold listing of repository `name` on ref records: {@link LISTING}, then the walk that proves it
 * from the proof that there is no table ({@link walkOf}), as the account is now.
 */
async function recordsListing(name: string): Promise<string[]> {
  return [...LISTING, ...(await walkOf(name, 'dev.knotless.refs', name))];
}

/** The requests one git command made at the PDS, as "nsid" strings in order. */
async function requestsOf(run: () => Promise<unknown>): Promise<string[]> {
  proxy!.reset();
  await run();
  return proxy!.requests.map((r) => r.nsid ?? r.path);
}

describe('requests per operation (identity cached)', () => {
  it('costs what docs/reference/performance.md says, on a ref table (the default)', async () => {
    layout = {};
    // The repository record, the check that no ref record of the name is left, and its empty table
    // swapped on the commit the record made.
    assert.deepEqual(
      await requestsOf(async () => assert.equal((await alice.knotless('repo', 'create', 'tabled')).code, 0)),
      ['com.atproto.repo.putRecord', 'com.atproto.repo.listRecords', 'com.atproto.repo.putRecord'],
    );
    const url = 'knotless://alice.test/tabled';
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    // A push, whatever it writes: the listing (the table's proof, and the ignored ref records beside
    // it), then one write of the table swapped on the CID it was read at; nothing read after it.
    const push = [...LISTING, 'com.atproto.repo.putRecord'];

    // First push to the empty table repo create made: the listing, the check that the repository
    // exists (an empty table says nothing of its repository record), the table's write.
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'main')), [
      ...LISTING,
      'com.atproto.repo.getRecord',
      'com.atproto.repo.putRecord',
    ]);

    await commitFiles(alice, dir, { a: '2' }, 'two');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'main')), push);

    // A new branch whose commit brings back the blob of the first push's blob pack: the new pack is
    // that pack byte for byte, listed once in the table (a table listing one pack twice is refused by
    // every reader, so the next listing would fail).
    await alice.ok(dir, 'checkout', '-q', '-b', 'topic');
    await commitFiles(alice, dir, { b: '1' }, 'topic');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'topic')), push);

    // Several new branches at once: still one write of the table.
    for (const b of ['x1', 'x2', 'x3']) await alice.ok(dir, 'branch', b);
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'x1', 'x2', 'x3')), push);

    // Clone (packs inline) and a fetch with nothing new: the listing alone.
    const out = alice.dir();
    assert.deepEqual(await requestsOf(() => alice.ok(out, 'clone', '-q', url, 'c')), LISTING);
    assert.deepEqual(await requestsOf(() => alice.ok(`${out}/c`, 'fetch')), LISTING);

    for (let i = 0; i < 3; i++) {
      await commitFiles(alice, dir, { b: `3.${i}` }, `topic 3.${i}`);
      assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'topic')), push);
    }

    await alice.ok(dir, 'checkout', '-q', 'main');
    await commitFiles(alice, dir, { a: '3' }, 'three');
    await alice.ok(dir, 'push', 'origin', 'main');
    assert.deepEqual(await requestsOf(() => alice.ok(`${out}/c`, 'fetch')), LISTING);
    assert.ok(proxy!.connections <= 2, `a fetch opened ${proxy!.connections} connections`);
  });

  it('repo create still starts on a table when the account is written between its record and its table', async () => {
    layout = {};
    const counted = proxy!;
    let written = false;
    const racing = await startProxy({
      target: t.net.pdsUrl,
      // Another machine writes the account after the repository record landed, before its table.
      onRequest: async (req) => {
        if (req.nsid !== 'com.atproto.repo.listRecords' || written) return;
        written = true;
        await putRaw(t, 'alice.test', 'dev.knotless.repo', 'elsewhere', {
          $type: 'dev.knotless.repo',
          createdAt: new Date().toISOString(),
        });
      },
    });
    proxy = racing;
    try {
      const made = await alice.knotless('repo', 'create', 'raced');
      assert.equal(made.code, 0, made.stderr);
      assert.ok(written);
      const seen = racing.requests.map((r) => r.nsid ?? r.path);
      // The table's write swapped on the record's commit is refused, and a whole migration follows:
      // the records it moves are listed again and proved at a signed commit (sync.getRecord), and the
      // table is written once more.
      assert.deepEqual(seen.slice(0, 3), [
        'com.atproto.repo.putRecord',
        'com.atproto.repo.listRecords',
        'com.atproto.repo.putRecord',
      ]);
      const rest = seen.slice(3);
      assert.ok(rest.includes('com.atproto.repo.listRecords'), seen.join(' '));
      assert.ok(rest.includes('com.atproto.sync.getRecord'), seen.join(' '));
      assert.ok(rest.includes('com.atproto.repo.putRecord'), seen.join(' '));
    } finally {
      proxy = counted;
      await racing.close();
    }
    // It is on its table: the first push writes the table, and lists no ref record.
    const dir = await newRepo(alice, 'knotless://alice.test/raced');
    await commitFiles(alice, dir, { a: '1' }, 'one');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'main')), [
      ...LISTING,
      'com.atproto.repo.getRecord',
      'com.atproto.repo.putRecord',
    ]);
  });

  it('costs what docs/reference/performance.md says, on ref records (KNOTLESS_REF_TABLE=0)', async () => {
    // The old layout, one record per ref: what a repository made without its table, or by a machine
    // that keeps it, costs.
    layout = { KNOTLESS_REF_TABLE: '0' };
    assert.equal((await alice.knotless('repo', 'create', 'counted')).code, 0);
    const url = 'knotless://alice.test/counted';
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');

    // First push to an empty repository: list (an empty listing is proved as any other: the walk
    // finds no key under the repository's name), check the repository exists, write the ref and HEAD
    // in one commit, then read the ref table again (each push to ref records ends so).
    let listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'main')), [
      ...listing,
      'com.atproto.repo.getRecord',
      'com.atproto.repo.applyWrites',
      CHECKED,
    ]);

    // A small push with no recent listing: the listing, then one record write with the pack inline.
    await commitFiles(alice, dir, { a: '2' }, 'two');
    listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'main')), [
      ...listing,
      'com.atproto.repo.putRecord',
      CHECKED,
    ]);

    // A new branch from main: the same two.
    await alice.ok(dir, 'checkout', '-q', '-b', 'topic');
    await commitFiles(alice, dir, { b: '1' }, 'topic');
    listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'topic')), [
      ...listing,
      'com.atproto.repo.putRecord',
      CHECKED,
    ]);

    // Several new branches at once: the listing, then one commit that creates them all.
    for (const b of ['x1', 'x2', 'x3']) await alice.ok(dir, 'branch', b);
    listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'x1', 'x2', 'x3')), [
      ...listing,
      'com.atproto.repo.applyWrites',
      CHECKED,
    ]);

    // Clone (packs inline) and a fetch with nothing new: the listing alone.
    const out = alice.dir();
    listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(out, 'clone', '-q', url, 'c')), listing);
    listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(`${out}/c`, 'fetch')), listing);

    // Pushes right after another: each lists again, because git decides "up to date", deletes,
    // prunes and leases from that answer before any compare-and-swap runs (as git's smart HTTP).
    await commitFiles(alice, dir, { b: '2' }, 'topic 2');
    await alice.ok(dir, 'push', 'origin', 'topic');
    for (let i = 0; i < 3; i++) {
      await commitFiles(alice, dir, { b: `3.${i}` }, `topic 3.${i}`);
      listing = await recordsListing('counted');
      assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'topic')), [
        ...listing,
        'com.atproto.repo.putRecord',
        CHECKED,
      ]);
    }

    // A fetch of a small change: still the listing alone, the pack travels in it.
    await alice.ok(dir, 'checkout', '-q', 'main');
    await commitFiles(alice, dir, { a: '3' }, 'three');
    await alice.ok(dir, 'push', 'origin', 'main');
    listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(`${out}/c`, 'fetch')), listing);
    // Two requests side by side: at most a connection each.
    assert.ok(proxy!.connections <= 2, `a fetch opened ${proxy!.connections} connections`);

    // The same repository pushed to with the default: moved onto its table first, once (performance.md,
    // "first push to a repository on ref records"), then written as a table is; the next push costs
    // what a push to a table costs.
    layout = {};
    await commitFiles(alice, dir, { a: '4' }, 'four');
    listing = await recordsListing('counted');
    const moved = await walkOf('counted', 'dev.knotless.ref', 'counted~');
    let said = '';
    assert.deepEqual(
      await requestsOf(async () => {
        const res = await alice.git(dir, 'push', 'origin', 'main');
        assert.equal(res.code, 0, res.stderr);
        said = res.stderr;
      }),
      [
        ...listing,
        CHECKED,
        'com.atproto.repo.getRecord',
        // The records it moves, proved whole from the account's newest commit (the proof of the
        // repository's first key carries it), the walk swapped on.
        'com.atproto.repo.listRecords',
        'com.atproto.sync.getRecord',
        ...moved,
        'com.atproto.repo.putRecord',
        'com.atproto.repo.listRecords',
        'com.atproto.repo.applyWrites',
        'com.atproto.repo.listRecords',
        CHECKED,
        'com.atproto.repo.putRecord',
      ],
    );
    assert.match(said, /^knotless: moved the \d+ ref\(s\) of alice\.test\/counted into its ref table first/m);
    await commitFiles(alice, dir, { a: '5' }, 'five');
    listing = await recordsListing('counted');
    assert.deepEqual(await requestsOf(() => alice.ok(dir, 'push', 'origin', 'main')), [
      ...listing,
      'com.atproto.repo.putRecord',
    ]);
  });
});
