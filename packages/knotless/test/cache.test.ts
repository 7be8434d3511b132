import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { DEFAULT_CACHE_MAX_BYTES, parseSize, readConfig } from '../../knotless-core/src/config/env.ts';
import { commitFiles, newRepo, refsOf, repoMaker, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

/** A small blob limit: each pack of these tests is several blobs, each a cache entry. */
const BLOB_LIMIT = 256 * 1024;
const t = useNetwork(['alice.test'], { blobUploadLimit: BLOB_LIMIT });
// Its repositories stay on ref records (KNOTLESS_REF_TABLE=0): the requests its cases script, hold
// or count are those of ref records.
t.defaults['KNOTLESS_REF_TABLE'] = '0';
let extra: Record<string, string> = {};
// No background compaction: each test decides what is in the cache, and when.
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0', ...extra }));
const createRepo = repoMaker(alice, 'alice.test', 'cache');

interface Kinds {
  blobs: { bytes: number; entries: number };
  mirrors: { bytes: number; entries: number };
  views: { bytes: number; entries: number };
  other: { bytes: number; entries: number };
}
interface Usage {
  dir: string;
  max: number;
  total: number;
  kinds: Kinds;
}

async function usage(user: GitUser): Promise<Usage> {
  const res = await user.knotless('cache', '--json');
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout) as Usage;
}

const cacheDir = (user: GitUser) => user.env['KNOTLESS_CACHE_DIR']!;
const blobDir = (user: GitUser) => path.join(cacheDir(user), 'blobs');
const blobs = (user: GitUser): Set<string> =>
  new Set(fs.existsSync(blobDir(user)) ? fs.readdirSync(blobDir(user)) : []);
const minus = (a: Set<string>, b: Set<string>) => new Set([...a].filter((x) => !b.has(x)));

/** A repository on the PDS holding `bytes` of incompressible data in one pack (so in blobs). */
async function pushedRepo(bytes: number): Promise<{ url: string; dir: string }> {
  const url = await createRepo();
  const dir = await newRepo(alice, url);
  await commitFiles(alice, dir, { 'data.bin': crypto.randomBytes(bytes) }, 'data');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  return { url, dir };
}

describe('the cache: a size cap, least recently used out, `knotless cache`', () => {
  it('reads KNOTLESS_CACHE_MAX as bytes with binary units, 1 GiB by default', () => {
    assert.equal(readConfig({}).cacheMaxBytes, DEFAULT_CACHE_MAX_BYTES);
    assert.equal(readConfig({ KNOTLESS_CACHE_MAX: '512M' }).cacheMaxBytes, 512 * 1024 ** 2);
    assert.equal(parseSize('2GiB'), 2 * 1024 ** 3);
    assert.equal(parseSize('1.5k'), 1536);
    assert.equal(parseSize('0'), 0);
    assert.equal(parseSize('lots'), undefined);
    assert.equal(readConfig({ KNOTLESS_CACHE_MAX: 'lots' }).cacheMaxBytes, DEFAULT_CACHE_MAX_BYTES);
  });

  it('stays within the cap after pushes and a clone each larger than it', async () => {
    const cap = 1024 * 1024;
    extra = { KNOTLESS_CACHE_MAX: String(cap) };
    try {
      const url = await createRepo();
      const dir = await newRepo(alice, url);
      for (let i = 0; i < 3; i++) {
        await commitFiles(alice, dir, { [`f${i}.bin`]: crypto.randomBytes(1200 * 1024) }, `push ${i}`);
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
        const u = await usage(alice);
        assert.ok(u.total <= cap, `after push ${i}: ${u.total} bytes cached, over the cap of ${cap}`);
        // The cap evicts the oldest, not everything: the last pack's newest blobs stay.
        assert.ok(u.kinds.blobs.entries > 0, `after push ${i}: nothing left in the cache`);
      }
      // A clone on another machine (another cache), of 3.6 MB of packs.
      const other = path.join(alice.dir(), 'c2');
      extra = { ...extra, KNOTLESS_CACHE_DIR: other };
      const out = alice.dir();
      await alice.ok(out, 'clone', '-q', url, 'c');
      assert.equal(await refsOf(alice, `${out}/c`, 'refs/heads/'), await refsOf(alice, dir, 'refs/heads/'));
      assert.equal((await alice.ok(`${out}/c`, 'fsck', '--full')).trim(), '');
      const u = await usage(alice);
      assert.equal(u.dir, other);
      assert.ok(u.total <= cap, `after the clone: ${u.total} bytes cached, over the cap of ${cap}`);
      assert.ok(u.kinds.blobs.entries > 0, 'after the clone: nothing left in the cache');
    } finally {
      extra = {};
    }
  });

  it('evicts the least recently used first: a pack read since it was pushed outlives a newer one', async () => {
    // A cache of its own, so that only this test's packs are in it.
    extra = { KNOTLESS_CACHE_DIR: path.join(alice.dir(), 'lru') };
    try {
      const user = { ...alice, env: { ...alice.env, ...extra } };
      const before = () => blobs(user);
      let seen = before();
      const owned: Set<string>[] = [];
      const repos: string[] = [];
      for (const size of [600, 900, 600]) {
        repos.push((await pushedRepo(size * 1024)).url);
        const now = before();
        owned.push(minus(now, seen));
        seen = now;
      }
      assert.ok(
        owned.every((o) => o.size >= 2),
        'each pack should be several blobs',
      );
      // The oldest push's pack is read again (a clone on this machine, from the cache).
      await alice.ok(alice.dir(), 'clone', '-q', repos[0]!, 'again');
      // A fourth push, with the cap at what the cache held before it: about its size must go.
      const held = (await usage(user)).total;
      extra = { ...extra, KNOTLESS_CACHE_MAX: String(held) };
      await pushedRepo(300 * 1024);
      const left = before();
      const [first, second, third] = owned.map((o) => [...o].filter((b) => left.has(b)).length);
      assert.equal(first, owned[0]!.size, 'the pack read since was evicted');
      assert.ok(second! < owned[1]!.size, 'the least recently used pack was not evicted');
      assert.equal(third, owned[2]!.size, 'a more recently used pack was evicted first');
      assert.ok((await usage(user)).total <= held);
    } finally {
      extra = {};
    }
  });

  it('`knotless cache` shows each kind and the total; `cache clear` empties blobs, mirrors and views', async () => {
    extra = { KNOTLESS_CACHE_DIR: path.join(alice.dir(), 'show') };
    try {
      const user = { ...alice, env: { ...alice.env, ...extra } };
      const { url } = await pushedRepo(700 * 1024);
      // repo commit works in a mirror and keeps a view.
      const note = path.join(alice.dir(), 'note.txt');
      fs.writeFileSync(note, 'hello\n');
      const name = url.slice(url.lastIndexOf('/') + 1);
      const commit = await alice.knotless('repo', 'commit', name, '-m', 'note', '--add', `note.txt=${note}`);
      assert.equal(commit.code, 0, commit.stderr);
      const u = await usage(user);
      const onDisk = [...blobs(user)].reduce((n, b) => n + fs.statSync(path.join(blobDir(user), b)).size, 0);
      assert.equal(u.kinds.blobs.bytes, onDisk);
      assert.equal(u.kinds.blobs.entries, blobs(user).size);
      assert.equal(u.kinds.mirrors.entries, 1);
      assert.ok(u.kinds.mirrors.bytes > 700 * 1024, 'the mirror holds the pack');
      assert.equal(u.kinds.views.entries, 1);
      assert.equal(
        u.total,
        u.kinds.blobs.bytes + u.kinds.mirrors.bytes + u.kinds.views.bytes + u.kinds.other.bytes,
      );
      assert.equal(u.max, DEFAULT_CACHE_MAX_BYTES);

      const text = await alice.knotless('cache');
      assert.equal(text.code, 0, text.stderr);
      const lines = text.stdout.trimEnd().split('\n');
      assert.equal(lines[0], cacheDir(user));
      assert.match(lines[1]!, /^ *\d+\.\d KiB {2}blobs \(packs by CID\), \d+$/);
      assert.match(lines[2]!, /^ *\d+\.\d KiB {2}mirrors \(bare repositories\), 1$/);
      assert.match(lines[5]!, /^ *\d+\.\d [KM]iB {2}total, of at most 1\.0 GiB \(KNOTLESS_CACHE_MAX\)$/);

      const help = await alice.knotless('cache', '--help');
      assert.equal(help.code, 0);
      assert.match(help.stdout, /^usage: knotless cache /);
      assert.match(help.stdout, /KNOTLESS_CACHE_MAX/);

      const cleared = await alice.knotless('cache', 'clear', '--json');
      assert.equal(cleared.code, 0, cleared.stderr);
      const c = JSON.parse(cleared.stdout) as Usage & { freed: number };
      assert.equal(c.freed, u.kinds.blobs.bytes + u.kinds.mirrors.bytes + u.kinds.views.bytes);
      for (const k of ['blobs', 'mirrors', 'views'] as const)
        assert.deepEqual(c.kinds[k], { bytes: 0, entries: 0 });
      // What is not refetchable or is tiny stays: the identity cache.
      assert.ok(fs.existsSync(path.join(cacheDir(user), 'identity.json')));
      // Everything comes back when needed.
      const out = alice.dir();
      await alice.ok(out, 'clone', '-q', url, 'c');
      assert.equal(fs.readFileSync(path.join(out, 'c', 'note.txt'), 'utf8'), 'hello\n');
      assert.ok((await usage(user)).kinds.blobs.entries > 0);
    } finally {
      extra = {};
    }
  });

  it('a clone or a repo commit while the cache is being emptied still succeeds', async () => {
    extra = { KNOTLESS_CACHE_DIR: path.join(alice.dir(), 'race') };
    try {
      const { url, dir } = await pushedRepo(2 * 1024 * 1024);
      const name = url.slice(url.lastIndexOf('/') + 1);
      const want = await refsOf(alice, dir, 'refs/heads/');
      let done = false;
      let clears = 0;
      const clearing = (async () => {
        while (!done) {
          const res = await alice.knotless('cache', 'clear', '--json');
          assert.equal(res.code, 0, res.stderr);
          clears++;
        }
      })();
      const readers = Array.from({ length: 3 }, async (_, i) => {
        const out = alice.dir();
        await alice.ok(out, 'clone', '-q', url, `c${i}`);
        assert.equal((await alice.ok(`${out}/c${i}`, 'fsck', '--full')).trim(), '');
        return refsOf(alice, `${out}/c${i}`, 'refs/heads/');
      });
      const note = path.join(alice.dir(), 'n.txt');
      fs.writeFileSync(note, 'x\n');
      const committing = alice.knotless('repo', 'commit', name, '-m', 'during', '--add', `n.txt=${note}`);
      const cloned = await Promise.all(readers);
      const commit = await committing;
      done = true;
      await clearing;
      assert.equal(commit.code, 0, commit.stderr);
      assert.ok(clears >= 2, `only ${clears} clears ran during the readers`);
      // The commit landed on top of the pushed data.
      const check = alice.dir();
      await alice.ok(check, 'clone', '-q', url, 'c');
      const after = await refsOf(alice, `${check}/c`, 'refs/heads/');
      assert.notEqual(after, want);
      // Each clone saw main before or after the commit, whole.
      for (const r of cloned) assert.ok(r === want || r === after, `a clone has refs ${r}`);
      assert.equal(fs.readFileSync(path.join(check, 'c', 'n.txt'), 'utf8'), 'x\n');
      assert.equal((await alice.ok(`${check}/c`, 'fsck', '--full')).trim(), '');
    } finally {
      extra = {};
    }
  });
});

describe('one copy of each pack', () => {
  it('after a compaction, the cache holds the merged pack once, and not the packs it replaced', async () => {
    extra = { KNOTLESS_CACHE_DIR: path.join(alice.dir(), 'dups') };
    try {
      const user = { ...alice, env: { ...alice.env, ...extra } };
      const url = await createRepo();
      const name = url.slice(url.lastIndexOf('/') + 1);
      const dir = await newRepo(alice, url);
      // Four pushes of a structure pack (inline) and a pack of one blob (uploaded, so cached) each,
      // merging into one of each kind: the merged blob pack in one blob.
      const data = 4 * 50 * 1024;
      for (let i = 0; i < 4; i++) {
        await commitFiles(alice, dir, { [`f${i}.bin`]: crypto.randomBytes(data / 4) }, `push ${i}`);
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
      }
      const compact = await alice.knotless('repo', 'compact', name);
      assert.equal(compact.code, 0, compact.stderr);
      assert.match(compact.stderr, /refs\/heads\/main: 8 packs → 2/);
      const owner = t.dids['alice.test']!.replaceAll(':', '_');
      const packDir = path.join(cacheDir(user), 'mirrors', owner, `${name}.git`, 'objects', 'pack');
      const packs = fs.readdirSync(packDir).filter((f) => f.endsWith('.pack'));
      assert.equal(packs.length, 2, `the mirror keeps the replaced packs: ${packs.join(', ')}`);
      const left = [...blobs(user)];
      assert.equal(left.length, 1, `the blob cache keeps the replaced packs: ${left.length} blobs`);
      // The merged blob pack's blob and the mirror's pack are one file.
      const blob = fs.statSync(path.join(blobDir(user), left[0]!)).ino;
      assert.ok(packs.some((p) => fs.statSync(path.join(packDir, p)).ino === blob));
      const u = await usage(user);
      const held = u.kinds.blobs.bytes + u.kinds.mirrors.bytes;
      assert.ok(held < data * 1.25, `${held} bytes cached for ${data} bytes of packs`);
      // The mirror still has every object: a repo commit builds on it, and a clone from the cache
      // (the merged pack's blob) gets everything.
      const note = path.join(alice.dir(), 'n.txt');
      fs.writeFileSync(note, 'after\n');
      const commit = await alice.knotless('repo', 'commit', name, '-m', 'after', '--add', `n.txt=${note}`);
      assert.equal(commit.code, 0, commit.stderr);
      const out = alice.dir();
      await alice.ok(out, 'clone', '-q', url, 'c');
      assert.equal((await alice.ok(`${out}/c`, 'fsck', '--full')).trim(), '');
      assert.equal(fs.readFileSync(path.join(out, 'c', 'n.txt'), 'utf8'), 'after\n');
    } finally {
      extra = {};
    }
  });
});
