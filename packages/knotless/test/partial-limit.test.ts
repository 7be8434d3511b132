// A blob over 1 MiB is stored in a pack of its own (`holds` blob, with its id and size), so that a
// `--filter=blob:limit=<n>` clone downloads none of its bytes, and a later checkout downloads the
// large blobs it needs, in one round; compaction keeps such packs apart. A `--filter=tree:0` clone
// holds what a clone from a bare repository holds. Real git, the reference PDS, directly and through
// the warm agent; every clone is checked against the same commits pushed to a bare repository over
// file://. A `--depth 1` clone downloads only the large blobs the tip's tree reaches.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import type { GitUser } from './helpers/git.ts';
import { useParity } from './helpers/parity.ts';

// The pack lists are read from the ref records: a ref table lists the same `#pack` entries, in a
// layout of its own (format.md), which these tests are not about.
const { t, plain, warm, other, ready, stopAgent, remotes, proxy, carriedByAgent } = useParity({
  KNOTLESS_REF_TABLE: '0',
});

const MIB = 1024 * 1024;

/** Bytes no compression shrinks: `size` of them, the same for the same seed. */
function noise(seed: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  for (let at = 0, i = 0; at < size; i++)
    at += crypto.createHash('sha256').update(`${seed}:${i}`).digest().copy(out, at);
  return out;
}

interface Pack {
  id: string;
  holds?: string;
  oid?: string;
  blobSize?: number;
  parts?: Array<{ ref: { $link: string } }>;
}

/** The pack list of `ref` in repository `name` as its record says, read from the PDS. */
async function packsOf(name: string, ref: string): Promise<Pack[]> {
  const query = new URLSearchParams({
    repo: t.dids['alice.test']!,
    collection: 'dev.knotless.ref',
    limit: '100',
  });
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.listRecords?${query.toString()}`);
  const { records } = (await res.json()) as { records: Array<{ value: Record<string, unknown> }> };
  const record = records.find((r) => r.value['repo'] === name && r.value['ref'] === ref);
  assert.ok(record !== undefined, `no record of ${ref}`);
  return record.value['packs'] as Pack[];
}

/** The blob CIDs getBlob was asked for in these requests, each as often as it was asked. */
function blobsFetched(requests: ReturnType<typeof proxy>['requests']): string[] {
  return requests
    .filter((r) => r.nsid === 'com.atproto.sync.getBlob')
    .map((r) => new URL(r.path, 'http://x').searchParams.get('cid') ?? '');
}

/** What a repository holds, object by object (the missing ones marked `?`), after a clean fsck. */
async function contents(user: GitUser, dir: string): Promise<string> {
  const objects = await user.ok(dir, 'rev-list', '--objects', '--all', '--missing=print');
  await user.ok(dir, 'fsck', '--no-progress', '--connectivity-only');
  return objects.split('\n').sort().join('\n');
}

/**
 * Small files, then three large ones over two commits, pushed to both remotes from another machine,
 * so that the cache of `user`, who clones, starts cold: every byte it needs crosses the proxy. The
 * files' bytes are the repository's own (seeded by its name): no other test's cache holds them.
 */
async function seeded(user: GitUser): Promise<{ url: string; bare: string; name: string; data: Data }> {
  const { bare, knotless: url } = await remotes(user);
  const name = url.split('/').pop()!;
  const data = (file: string, size: number) => noise(`${name}:${file}`, size);
  const dir = other.dir();
  await other.ok(dir, 'init', '-q');
  fs.writeFileSync(path.join(dir, 'small'), data('small', 20_000));
  fs.writeFileSync(path.join(dir, 'big1'), data('big1', 2 * MIB));
  await other.ok(dir, 'add', '.');
  await other.ok(dir, 'commit', '-q', '-m', 'one');
  fs.mkdirSync(path.join(dir, 'sub'));
  fs.writeFileSync(path.join(dir, 'sub', 'big2'), data('sub/big2', 2 * MIB));
  fs.writeFileSync(path.join(dir, 'big3'), data('big3', 2 * MIB));
  fs.writeFileSync(path.join(dir, 'small2'), data('small2', 30_000));
  await other.ok(dir, 'add', '.');
  await other.ok(dir, 'commit', '-q', '-m', 'two');
  for (const u of [url, bare]) await other.ok(dir, 'push', '-q', u, 'main');
  // The reference serves filters and wants of any object its refs reach, as the helper's mirror does.
  const served = bare.slice('file://'.length);
  await other.ok(served, 'config', 'uploadpack.allowFilter', 'true');
  await other.ok(served, 'config', 'uploadpack.allowReachableSHA1InWant', 'true');
  return { url, bare, name, data };
}

/** A seeded file's bytes: its path and size. */
type Data = (file: string, size: number) => Buffer;

for (const [who, user] of [
  ['directly', plain],
  ['through the agent', warm],
] as const) {
  describe(`large blobs on their own, ${who}`, () => {
    after(() => stopAgent());

    it('a blob:limit=1m clone downloads none of the large blobs; its checkout downloads them in one round', async () => {
      await ready(user);
      const { url, bare, name, data } = await seeded(user);
      const packs = await packsOf(name, 'refs/heads/main');
      const large = packs.filter((p) => p.holds === 'blob');
      assert.equal(large.length, 3, `holds: ${packs.map((p) => p.holds).join(', ')}`);
      for (const p of large) {
        assert.equal(p.blobSize, 2 * MIB);
        assert.match(p.oid ?? '', /^[0-9a-f]{40}$/);
        assert.ok((p.parts ?? []).length > 0, `large pack ${p.id} is not stored in blobs`);
      }
      assert.ok(packs.some((p) => p.holds === 'blobs') && packs.some((p) => p.holds === 'structure'));
      // The large blobs' bytes are in their own packs: the pack of the other blobs is small.
      for (const p of packs.filter((p) => p.holds !== 'blob'))
        assert.ok(JSON.stringify(p).length < MIB, `pack ${p.id} (${p.holds}) carries a large blob`);
      const largeCids = new Set(large.flatMap((p) => p.parts!.map((b) => b.ref.$link)));

      const dir = user.dir();
      const bl = path.join(dir, 'bl');
      const ref = path.join(dir, 'ref');
      const from = proxy().requests.length;
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=1m', url, bl);
      const cloned = proxy().requests.slice(from);
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=1m', bare, ref);
      const fetched = blobsFetched(cloned);
      assert.ok(fetched.length > 0, 'the clone downloaded no blob at all');
      assert.deepEqual(
        fetched.filter((c) => largeCids.has(c)),
        [],
        'the blob:limit clone downloaded a large blob',
      );
      // The same objects present and promised (the three large blobs) as the reference's clone.
      assert.equal(await contents(user, bl), await contents(user, ref));
      assert.equal((await contents(user, bl)).match(/^\?/gm)?.length, 3);

      const before = proxy().requests.length;
      for (const d of [bl, ref]) await user.ok(d, 'checkout', '-q', 'main');
      const checkout = blobsFetched(proxy().requests.slice(before));
      // Each large blob's parts once, in the checkout's one lazy fetch; nothing else.
      assert.deepEqual([...checkout].sort(), [...largeCids].sort());
      for (const file of ['big1', 'sub/big2', 'big3'])
        assert.ok(fs.readFileSync(path.join(bl, file)).equals(data(file, 2 * MIB)), file);
      assert.ok(fs.readFileSync(path.join(bl, 'small2')).equals(data('small2', 30_000)));
      assert.equal(await contents(user, bl), await contents(user, ref));
      assert.doesNotMatch(await contents(user, bl), /^\?/m);
      if (user === warm) carriedByAgent(proxy().requests.slice(from));
    });

    it('a blob:limit above a large blob downloads it; tree:0 holds what the reference holds', async () => {
      await ready(user);
      const { url, bare, name, data } = await seeded(user);
      const large = (await packsOf(name, 'refs/heads/main')).filter((p) => p.holds === 'blob');
      const largeCids = new Set(large.flatMap((p) => p.parts!.map((b) => b.ref.$link)));
      const dir = user.dir();
      const from = proxy().requests.length;
      // 3m lets every 2 MiB blob through: their packs are needed.
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=3m', url, 'b3');
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=3m', bare, 'r3');
      assert.deepEqual(
        blobsFetched(proxy().requests.slice(from))
          .filter((c) => largeCids.has(c))
          .sort(),
        [...largeCids].sort(),
      );
      assert.equal(await contents(user, path.join(dir, 'b3')), await contents(user, path.join(dir, 'r3')));
      assert.doesNotMatch(await contents(user, path.join(dir, 'b3')), /^\?/m);

      const tree0 = path.join(dir, 't0');
      const tref = path.join(dir, 'tref');
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=tree:0', url, tree0);
      await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=tree:0', bare, tref);
      assert.equal(await contents(user, tree0), await contents(user, tref));
      assert.match(await contents(user, tree0), /^\?/m);
      for (const d of [tree0, tref]) {
        await user.ok(d, 'sparse-checkout', 'set', 'sub');
        await user.ok(d, 'checkout', '-q', 'main');
      }
      assert.ok(fs.readFileSync(path.join(tree0, 'sub', 'big2')).equals(data('sub/big2', 2 * MIB)));
      // The same files checked out as from the reference (cone mode keeps the top level's files).
      const tracked = (d: string) => user.ok(d, 'ls-files', '-t');
      assert.equal(await tracked(tree0), await tracked(tref));
      assert.equal(await contents(user, tree0), await contents(user, tref));
      if (user === warm) carriedByAgent(proxy().requests.slice(from));
    });

    it('a --depth 1 clone downloads no large blob that only older history reaches', async () => {
      await ready(user);
      const { bare, knotless: url } = await remotes(user);
      const name = url.split('/').pop()!;
      const data = (file: string, size: number) => noise(`${name}:${file}`, size);
      // `old` lives in the first commit only; `kept`, as large, is in the tip's tree.
      const odir = other.dir();
      await other.ok(odir, 'init', '-q');
      fs.writeFileSync(path.join(odir, 'small'), data('small', 20_000));
      fs.writeFileSync(path.join(odir, 'old'), data('old', 2 * MIB));
      await other.ok(odir, 'add', '.');
      await other.ok(odir, 'commit', '-q', '-m', 'one');
      await other.ok(odir, 'rm', '-q', 'old');
      fs.writeFileSync(path.join(odir, 'kept'), data('kept', 2 * MIB));
      await other.ok(odir, 'add', '.');
      await other.ok(odir, 'commit', '-q', '-m', 'two');
      for (const u of [url, bare]) await other.ok(odir, 'push', '-q', u, 'main');
      const oldOid = (await other.ok(odir, 'rev-parse', 'HEAD~1:old')).trim();
      const keptOid = (await other.ok(odir, 'rev-parse', 'HEAD:kept')).trim();
      const large = (await packsOf(name, 'refs/heads/main')).filter((p) => p.holds === 'blob');
      const cidsOf = (oid: string) => {
        const p = large.find((l) => l.oid === oid);
        assert.ok(p !== undefined, `no pack of its own for ${oid}`);
        return p.parts!.map((b) => b.ref.$link);
      };
      const oldCids = cidsOf(oldOid);
      const keptCids = cidsOf(keptOid);

      const dir = user.dir();
      const from = proxy().requests.length;
      await user.ok(dir, 'clone', '-q', '--depth', '1', url, 'd1');
      const fetched = blobsFetched(proxy().requests.slice(from));
      await user.ok(dir, 'clone', '-q', '--depth', '1', bare, 'dref');
      assert.deepEqual(
        fetched.filter((c) => oldCids.includes(c)),
        [],
        'the depth-1 clone downloaded the large blob only older history has',
      );
      // The tip's own large blob is needed, and downloaded once.
      assert.deepEqual(fetched.filter((c) => keptCids.includes(c)).sort(), [...keptCids].sort());
      const d1 = path.join(dir, 'd1');
      const dref = path.join(dir, 'dref');
      assert.equal(await contents(user, d1), await contents(user, dref));
      assert.doesNotMatch(await contents(user, d1), /^\?/m);
      assert.equal(
        await user.ok(d1, 'rev-parse', '--is-shallow-repository'),
        await user.ok(dref, 'rev-parse', '--is-shallow-repository'),
      );
      assert.equal(
        fs.readFileSync(path.join(d1, '.git', 'shallow'), 'utf8'),
        fs.readFileSync(path.join(dref, '.git', 'shallow'), 'utf8'),
      );
      assert.ok(fs.readFileSync(path.join(d1, 'kept')).equals(data('kept', 2 * MIB)));
      await user.ok(d1, 'fsck', '--no-progress');
      // Deepening later needs the old commit's tree, and so its large blob.
      const deeper = proxy().requests.length;
      await user.ok(d1, 'fetch', '-q', '--unshallow');
      assert.deepEqual(
        blobsFetched(proxy().requests.slice(deeper))
          .filter((c) => oldCids.includes(c))
          .sort(),
        [...oldCids].sort(),
      );
      assert.equal((await user.ok(d1, 'cat-file', '-s', oldOid)).trim(), String(2 * MIB));
      await user.ok(d1, 'fsck', '--no-progress');
      if (user === warm) carriedByAgent(proxy().requests.slice(from));
    });
  });
}

describe('large blobs on their own, compacted', () => {
  it('a compaction merges the other packs and keeps each large blob in its own pack, which blob:limit still skips', async () => {
    // Pushed and compacted on the other machine; cloned by `plain`, whose cache starts cold.
    const user = plain;
    const { url, bare, name, data } = await seeded(user);
    const dir = user.dir();
    const odir = other.dir();
    await other.ok(odir, 'clone', '-q', url, 'w');
    const w = path.join(odir, 'w');
    // Equal pushes of small files make each kind's list far from geometric.
    for (const round of [1, 2, 3, 4]) {
      fs.writeFileSync(path.join(w, `f${round}`), data(`f${round}`, 40_000));
      await other.ok(w, 'add', '.');
      await other.ok(w, 'commit', '-q', '-m', `round ${round}`);
      await other.ok(w, 'push', '-q', 'origin', 'main');
      await other.ok(w, 'push', '-q', bare, 'main');
    }
    const before = await packsOf(name, 'refs/heads/main');
    const large = before.filter((p) => p.holds === 'blob');
    assert.equal(large.length, 3);
    const res = await other.knotless('repo', 'compact', name);
    assert.equal(res.code, 0, res.stderr);
    const after = await packsOf(name, 'refs/heads/main');
    assert.ok(after.length < before.length, `not compacted: ${before.length} → ${after.length}`);
    // The large packs unchanged (the same ids, blob references, sizes); the rest merged by kind.
    assert.deepEqual(
      after.filter((p) => p.holds === 'blob'),
      large,
    );
    assert.ok(after.every((p) => p.holds === 'blob' || p.holds === 'structure' || p.holds === 'blobs'));
    const largeCids = new Set(large.flatMap((p) => p.parts!.map((b) => b.ref.$link)));
    const from = proxy().requests.length;
    await user.ok(dir, 'clone', '-q', '--filter=blob:limit=1m', url, 'bl');
    await user.ok(dir, 'clone', '-q', '--filter=blob:limit=1m', bare, 'ref');
    const fetched = blobsFetched(proxy().requests.slice(from));
    // The checkout of the tip needs big1, sub/big2, big3: each once, after a clone that fetched none.
    assert.deepEqual(fetched.filter((c) => largeCids.has(c)).sort(), [...largeCids].sort());
    assert.equal(await contents(user, path.join(dir, 'bl')), await contents(user, path.join(dir, 'ref')));
    assert.ok(fs.readFileSync(path.join(dir, 'bl', 'f4')).equals(data('f4', 40_000)));
    assert.ok(fs.readFileSync(path.join(dir, 'bl', 'big3')).equals(data('big3', 2 * MIB)));
  });
});

describe('large blobs on their own, a delta against one in the pusher', () => {
  it("a small blob stored in the pusher's pack as a delta against a large blob is pushed whole: blob:limit still skips the large blob", async () => {
    const user = plain;
    const { bare, knotless: url } = await remotes(user);
    const name = url.split('/').pop()!;
    const big = noise(`${name}:big`, 2 * MIB);
    // `data` is first the large blob, then its first 900,000 bytes and a little more. git sorts delta
    // candidates by their path and then by size, largest first: under the same path, `part` is made
    // a delta against `big`.
    const part = Buffer.concat([big.subarray(0, 900_000), noise(`${name}:tail`, 100)]);
    const odir = other.dir();
    await other.ok(odir, 'init', '-q');
    fs.writeFileSync(path.join(odir, 'data'), big);
    fs.writeFileSync(path.join(odir, 'small'), noise(`${name}:small`, 5000));
    await other.ok(odir, 'add', '.');
    await other.ok(odir, 'commit', '-q', '-m', 'one');
    fs.writeFileSync(path.join(odir, 'data'), part);
    await other.ok(odir, 'commit', '-q', '-a', '-m', 'two');
    await other.ok(odir, 'repack', '-adf', '-q');
    const bigOid = (await other.ok(odir, 'rev-parse', 'HEAD~1:data')).trim();
    const partOid = (await other.ok(odir, 'rev-parse', 'HEAD:data')).trim();
    // The premise: in the pusher's own pack, `part` is a delta whose base is `big`.
    const packDir = path.join(odir, '.git', 'objects', 'pack');
    const idx = fs.readdirSync(packDir).filter((x) => x.endsWith('.idx'));
    assert.equal(idx.length, 1);
    const verify = await other.ok(odir, 'verify-pack', '-v', path.join(packDir, idx[0]!));
    const partLine = verify.split('\n').find((l) => l.startsWith(`${partOid} `));
    assert.ok(partLine !== undefined, verify);
    assert.equal(partLine.trim().split(/\s+/).at(-1), bigOid, `part is not a delta against big: ${partLine}`);

    for (const u of [url, bare]) await other.ok(odir, 'push', '-q', u, 'main');
    await other.ok(bare.slice('file://'.length), 'config', 'uploadpack.allowFilter', 'true');
    await other.ok(bare.slice('file://'.length), 'config', 'uploadpack.allowReachableSHA1InWant', 'true');
    const packs = await packsOf(name, 'refs/heads/main');
    assert.deepEqual(
      packs.map((p) => p.holds),
      ['structure', 'blobs', 'blob'],
    );
    assert.equal(packs[2]!.oid, bigOid);
    const largeCids = packs[2]!.parts!.map((b) => b.ref.$link);

    const dir = user.dir();
    const from = proxy().requests.length;
    await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=1m', url, 'bl');
    await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=1m', bare, 'ref');
    const fetched = blobsFetched(proxy().requests.slice(from));
    assert.ok(fetched.length > 0, 'the clone downloaded no blob at all');
    assert.deepEqual(
      fetched.filter((c) => largeCids.includes(c)),
      [],
      'the blob:limit clone downloaded the large blob that was a delta base in the pusher',
    );
    const bl = path.join(dir, 'bl');
    assert.equal(await contents(user, bl), await contents(user, path.join(dir, 'ref')));
    assert.equal((await contents(user, bl)).match(/^\?/gm)?.length, 1);
    // The tip needs `part` only, which the clone holds whole; `big` comes when it is asked for.
    await user.ok(bl, 'checkout', '-q', 'main');
    assert.ok(fs.readFileSync(path.join(bl, 'data')).equals(part));
    assert.deepEqual(
      blobsFetched(proxy().requests.slice(from)).filter((c) => largeCids.includes(c)),
      [],
    );
    await user.ok(bl, 'checkout', '-q', 'main~1');
    assert.ok(fs.readFileSync(path.join(bl, 'data')).equals(big));
    assert.deepEqual(
      blobsFetched(proxy().requests.slice(from))
        .filter((c) => largeCids.includes(c))
        .sort(),
      [...largeCids].sort(),
    );
    await user.ok(bl, 'fsck', '--no-progress');
  });

  it('a later push whose small blob the pusher stored as a delta against a large blob pushed before: the clone is right, and costs the large blob', async () => {
    const user = plain;
    const { bare, knotless: url } = await remotes(user);
    const name = url.split('/').pop()!;
    const big = noise(`${name}:big`, 2 * MIB);
    const part = Buffer.concat([big.subarray(0, 900_000), noise(`${name}:tail`, 100)]);
    const odir = other.dir();
    await other.ok(odir, 'init', '-q');
    fs.writeFileSync(path.join(odir, 'data'), big);
    fs.writeFileSync(path.join(odir, 'small'), noise(`${name}:small`, 5000));
    await other.ok(odir, 'add', '.');
    await other.ok(odir, 'commit', '-q', '-m', 'one');
    for (const u of [url, bare]) await other.ok(odir, 'push', '-q', u, 'main');
    fs.writeFileSync(path.join(odir, 'data'), part);
    await other.ok(odir, 'commit', '-q', '-a', '-m', 'two');
    await other.ok(odir, 'repack', '-adf', '-q');
    const bigOid = (await other.ok(odir, 'rev-parse', 'HEAD~1:data')).trim();
    const partOid = (await other.ok(odir, 'rev-parse', 'HEAD:data')).trim();
    const packDir = path.join(odir, '.git', 'objects', 'pack');
    const idx = fs.readdirSync(packDir).filter((x) => x.endsWith('.idx'));
    const verify = await other.ok(odir, 'verify-pack', '-v', path.join(packDir, idx[0]!));
    const partLine = verify.split('\n').find((l) => l.startsWith(`${partOid} `));
    assert.equal(
      partLine?.trim().split(/\s+/).at(-1),
      bigOid,
      `part is not a delta against big: ${partLine}`,
    );
    for (const u of [url, bare]) await other.ok(odir, 'push', '-q', u, 'main');
    await other.ok(bare.slice('file://'.length), 'config', 'uploadpack.allowFilter', 'true');
    const packs = await packsOf(name, 'refs/heads/main');
    assert.deepEqual(
      packs.map((p) => p.holds),
      ['structure', 'blobs', 'blob', 'structure', 'blobs'],
    );
    const largeCids = packs[2]!.parts!.map((b) => b.ref.$link);

    const dir = user.dir();
    const from = proxy().requests.length;
    await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=1m', url, 'bl');
    await user.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=1m', bare, 'ref');
    const bl = path.join(dir, 'bl');
    // git gets what it asked for: the same objects as from file://, the large blob promised.
    assert.equal(await contents(user, bl), await contents(user, path.join(dir, 'ref')));
    assert.equal((await contents(user, bl)).match(/^\?/gm)?.length, 1);
    // What it costs: the second push's blob pack is thin against the large blob (pack-objects reused
    // the pusher's delta against a preferred base; pack.bigFileThreshold stops only new deltas), so
    // the mirror cannot index it without the large blob, and downloads every pack (format.md).
    assert.deepEqual(
      blobsFetched(proxy().requests.slice(from))
        .filter((c) => largeCids.includes(c))
        .sort(),
      [...largeCids].sort(),
    );
    await user.ok(bl, 'checkout', '-q', 'main');
    assert.ok(fs.readFileSync(path.join(bl, 'data')).equals(part));
    await user.ok(bl, 'fsck', '--no-progress');
  });
});

describe('large blobs on their own, merged', () => {
  it('pr merge writes the split as a push does: the structure, the blobs, and each large blob alone', async () => {
    const user = plain;
    const { url, name, data } = await seeded(user);
    const odir = other.dir();
    await other.ok(odir, 'clone', '-q', url, 'w');
    const w = path.join(odir, 'w');
    await other.ok(w, 'switch', '-q', '-c', 'feature');
    fs.writeFileSync(path.join(w, 'big4'), data('big4', 2 * MIB));
    fs.writeFileSync(path.join(w, 'note'), data('note', 10_000));
    await other.ok(w, 'add', '.');
    await other.ok(w, 'commit', '-q', '-m', 'feature');
    await other.ok(w, 'push', '-q', 'origin', 'feature');
    // main moves on, so that the merge makes a commit of its own.
    await other.ok(w, 'switch', '-q', 'main');
    fs.writeFileSync(path.join(w, 'h'), 'h\n');
    await other.ok(w, 'add', 'h');
    await other.ok(w, 'commit', '-q', '-m', 'h');
    await other.ok(w, 'push', '-q', 'origin', 'main');
    const big4 = (await other.ok(w, 'rev-parse', 'feature:big4')).trim();

    const before = await packsOf(name, 'refs/heads/main');
    const made = await user.knotless(
      'pr',
      'create',
      name,
      '--head',
      `${name}:feature`,
      '--title',
      'F',
      '--json',
    );
    assert.equal(made.code, 0, made.stderr);
    const id = (JSON.parse(made.stdout) as { id: string }).id;
    const res = await user.knotless('pr', 'merge', name, id.split('/').pop()!, '--merge', '--json');
    assert.equal(res.code, 0, res.stderr);
    assert.equal((JSON.parse(res.stdout) as { fastForward: boolean }).fastForward, false);
    const after = await packsOf(name, 'refs/heads/main');
    assert.deepEqual(
      after.slice(0, before.length).map((p) => p.id),
      before.map((p) => p.id),
    );
    const added = after.slice(before.length);
    assert.deepEqual(
      added.map((p) => p.holds),
      ['structure', 'blobs', 'blob'],
    );
    assert.equal(added[2]!.oid, big4);
    assert.equal(added[2]!.blobSize, 2 * MIB);
    const merged = path.join(odir, 'merged');
    await other.ok(odir, 'clone', '-q', url, merged);
    assert.ok(fs.readFileSync(path.join(merged, 'big4')).equals(data('big4', 2 * MIB)));
    await other.ok(merged, 'fsck', '--no-progress');
  });
});
