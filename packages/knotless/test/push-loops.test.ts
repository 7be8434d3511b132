import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// Every ref write of a push runs on swapLoop (ops/push/write.ts): these check, by the requests the
// PDS sees, that the batched first attempt of new refs and the rebuild after a blob went missing
// stay one per push, not one per ref. Those loops are ref records' (a push to a ref table is one write
// of it), so the repositories here stay on ref records (KNOTLESS_REF_TABLE=0).
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
const plain = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_AGENT: '0',
  KNOTLESS_COMPACT: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
});
after(() => proxy?.close());

/** Incompressible content: every push of it is a pack stored in blobs, not inline. */
const big = (): Uint8Array => crypto.randomBytes(40_000);

let n = 0;
async function repoWith(branches: string[]): Promise<{ url: string; dir: string }> {
  const name = `loops-${++n}`;
  assert.equal((await plain.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(plain, url);
  await commitFiles(plain, dir, { one: big() }, 'c1');
  for (const b of branches) await plain.ok(dir, 'branch', b);
  await plain.ok(dir, 'push', '-q', 'origin', 'main', ...branches);
  return { url, dir };
}

async function remote(url: string): Promise<Map<string, string>> {
  const out = await plain.ok(plain.dir(), 'ls-remote', url);
  return new Map(
    out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => [l.split('\t')[1]!, l.split('\t')[0]!]),
  );
}

/**
 * The requests the proxy saw, but the ref table's proof, which a cold push reads beside the listing
 * and once more after its writes (a table a migration may have made meanwhile: format.md, "Old
 * repositories"), checked here: the order below is the push's own.
 */
// `proofs`: the getRecords of proved listings (the first, the one after the writes, and one for
// each listing read again to rebuild packs); the walks' getBlocks beside them are left out too.
const names = (proofs = 2) => {
  const all = proxy!.requests.map((r) => r.nsid ?? r.path);
  assert.equal(all.filter((n) => n === 'com.atproto.sync.getRecord').length, proofs, all.join(' '));
  assert.equal(all.at(-1), 'com.atproto.sync.getRecord', all.join(' '));
  return all.filter((n) => n !== 'com.atproto.sync.getRecord' && n !== 'com.atproto.sync.getBlocks');
};

describe('a push of several refs', () => {
  it('rebuilds its packs once for the whole push when every write names a blob gone', async () => {
    const { url, dir } = await repoWith(['topic']);
    const c2 = await commitFiles(plain, dir, { two: big() }, 'c2');
    await plain.ok(dir, 'branch', '-f', 'topic');
    proxy!.reset();
    proxy!.inject({
      nsid: 'com.atproto.repo.putRecord',
      times: 2,
      fault: { kind: 'status', status: 400, error: 'BlobNotFound' },
    });
    const res = await plain.git(dir, 'push', 'origin', 'main', 'topic');
    proxy!.clearFaults();
    assert.equal(res.code, 0, res.stderr);
    // Both refs' loops hit BlobNotFound; the second waits on the first's rebuild: one listing, one
    // pack uploaded again, not one per ref. (The second refusal may arrive after the rebuild began:
    // the order of the middle requests is the network's.) The listing read again is proved as the
    // first was: one more proof.
    const seen = names(3);
    assert.deepEqual(seen.slice(0, 2), ['com.atproto.repo.listRecords', 'com.atproto.repo.uploadBlob']);
    assert.deepEqual(seen.slice(2).sort(), [
      'com.atproto.repo.listRecords',
      'com.atproto.repo.putRecord',
      'com.atproto.repo.putRecord',
      'com.atproto.repo.putRecord',
      'com.atproto.repo.putRecord',
      'com.atproto.repo.uploadBlob',
    ]);
    assert.deepEqual(seen.slice(-2), ['com.atproto.repo.putRecord', 'com.atproto.repo.putRecord']);
    const refs = await remote(url);
    assert.equal(refs.get('refs/heads/main'), c2);
    assert.equal(refs.get('refs/heads/topic'), c2);
    const clone = plain.dir();
    await plain.ok(clone, 'clone', '-q', url, 'c');
    await plain.ok(`${clone}/c`, 'fsck', '--strict');
  });

  it('writes new refs whose batch was refused each in its own loop, with no read in between', async () => {
    const { url, dir } = await repoWith([]);
    for (const b of ['x1', 'x2']) await plain.ok(dir, 'branch', b);
    const head = (await plain.ok(dir, 'rev-parse', 'main')).trim();
    proxy!.reset();
    proxy!.inject({
      nsid: 'com.atproto.repo.applyWrites',
      fault: { kind: 'status', status: 400, error: 'InvalidRequest' },
    });
    const res = await plain.git(dir, 'push', 'origin', 'x1', 'x2');
    proxy!.clearFaults();
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(names(), [
      'com.atproto.repo.listRecords',
      'com.atproto.repo.applyWrites',
      'com.atproto.repo.putRecord',
      'com.atproto.repo.putRecord',
    ]);
    const refs = await remote(url);
    assert.equal(refs.get('refs/heads/x1'), head);
    assert.equal(refs.get('refs/heads/x2'), head);
  });
});
