import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, refsOf, useGitUser, repoMaker } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { storedPacks } from './helpers/ref-packs.ts';

/** A small blob limit, so that "larger than the limit" stays cheap to test. */
const BLOB_LIMIT = 512 * 1024;
const t = useNetwork(['alice.test'], { blobUploadLimit: BLOB_LIMIT });
let trace = false;
const alice = useGitUser(t, 'alice.test', () => (trace ? { KNOTLESS_TRACE: '1' } : {}));

const createRepo = repoMaker(alice, 'alice.test', 'large');

const count = (stderr: string, nsid: string) =>
  stderr.split('\n').filter((l) => l.includes(` ${nsid} `)).length;

describe('binary files, large packs, many branches and the cache', () => {
  it('round-trips binary files, one of them larger than the blob limit', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    const big = crypto.randomBytes(BLOB_LIMIT * 2 + 12345);
    const small = Buffer.from([0, 1, 2, 255, 0, 10, 13, 0]);
    await commitFiles(alice, dir, { 'big.bin': big, 'small.bin': small, 'text.txt': 'x\n' }, 'binaries');
    trace = true;
    const push = await alice.git(dir, 'push', 'origin', 'main');
    trace = false;
    assert.equal(push.code, 0, push.stderr);
    assert.ok(count(push.stderr, 'com.atproto.repo.uploadBlob') >= 3, 'the pack was not split into parts');

    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.ok(fs.readFileSync(path.join(out, 'c', 'big.bin')).equals(big));
    assert.ok(fs.readFileSync(path.join(out, 'c', 'small.bin')).equals(small));
    assert.equal((await alice.ok(`${out}/c`, 'fsck', '--full')).trim(), '');
  });

  it('pushes many files whose pack exceeds the blob limit, then small changes on top', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    const files: Record<string, Uint8Array> = {};
    for (let i = 0; i < 40; i++) files[`data/f${i}.bin`] = crypto.randomBytes(40 * 1024);
    await commitFiles(alice, dir, files, 'many files');
    await alice.ok(dir, 'push', 'origin', 'main');
    for (let i = 0; i < 3; i++) {
      await commitFiles(alice, dir, { 'small.txt': `change ${i}\n` }, `small ${i}`);
      await alice.ok(dir, 'push', 'origin', 'main');
    }
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.equal(await refsOf(alice, `${out}/c`, 'refs/heads/'), await refsOf(alice, dir, 'refs/heads/'));
    assert.equal((await alice.ok(`${out}/c`, 'fsck', '--full')).trim(), '');
  });

  it('pushes and clones 1,000 branches', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    const commits: string[] = [];
    for (let i = 0; i < 20; i++) commits.push(await commitFiles(alice, dir, { 'f.txt': `${i}\n` }, `c${i}`));
    const lines = Array.from(
      { length: 999 },
      (_, i) => `create refs/heads/agent/${i} ${commits[i % commits.length]}`,
    );
    const made = await runProcess('git', ['update-ref', '--stdin'], {
      cwd: dir,
      env: alice.env,
      input: lines.join('\n') + '\n',
    });
    assert.equal(made.code, 0, made.stderr);
    const push = await alice.git(dir, 'push', 'origin', 'refs/heads/*:refs/heads/*');
    assert.equal(push.code, 0, push.stderr);

    const ls = (await alice.ok(dir, 'ls-remote', '--heads', url)).trim().split('\n');
    assert.equal(ls.length, 1000);
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', '--mirror', url, 'm.git');
    assert.equal(await refsOf(alice, `${out}/m.git`, 'refs/heads/'), await refsOf(alice, dir, 'refs/heads/'));
  });

  it('downloads each pack once: a second clone fetches nothing but the listing', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { 'big.bin': crypto.randomBytes(200 * 1024) }, 'big');
    await alice.ok(dir, 'push', 'origin', 'main');
    // The pusher cached what it uploaded; this machine should download it once.
    fs.rmSync(path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'blobs'), { recursive: true, force: true });
    trace = true;
    const first = await alice.git(alice.dir(), 'clone', url, 'a');
    const second = await alice.git(alice.dir(), 'clone', url, 'b');
    trace = false;
    assert.equal(count(first.stderr, 'com.atproto.sync.getBlob'), 1);
    assert.equal(count(second.stderr, 'com.atproto.sync.getBlob'), 0);
    // The listing, and nothing else of the repository's (the cached handle's fresh check asks the dev
    // PDS its resolveHandle, where the real network asks DNS): on its ref table, where it starts, the
    // table's verified read and the older records' listing beside it (format.md, "The ref table").
    const requests = second.stderr
      .split('\n')
      .filter((l) => l.startsWith('knotless: trace') && !l.includes('com.atproto.identity.resolveHandle'))
      .map((l) => l.split(' ')[4])
      .sort();
    assert.deepEqual(requests, ['com.atproto.repo.listRecords', 'com.atproto.sync.getRecord'], second.stderr);
  });

  it('shares one cache between concurrent clones, and survives the cache being deleted', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { 'big.bin': crypto.randomBytes(BLOB_LIMIT * 3) }, 'big');
    await alice.ok(dir, 'push', 'origin', 'main');
    fs.rmSync(path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'blobs'), { recursive: true, force: true });
    const clones = await Promise.all(
      Array.from({ length: 4 }, (_, i) => alice.git(alice.dir(), 'clone', '-q', url, `c${i}`)),
    );
    for (const c of clones) assert.equal(c.code, 0, c.stderr);
    const blobs = fs.readdirSync(path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'blobs'));
    assert.equal(blobs.filter((f) => f.endsWith('.tmp')).length, 0, 'temporary files were left behind');
    fs.rmSync(alice.env['KNOTLESS_CACHE_DIR']!, { recursive: true, force: true });
    const again = await alice.git(alice.dir(), 'clone', '-q', url, 'x');
    assert.equal(again.code, 0, again.stderr);
  });

  it('leaves nothing behind: deleting the only ref that lists a blob lets the PDS free it', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'base');
    await alice.ok(dir, 'push', 'origin', 'main');
    await alice.ok(dir, 'checkout', '-q', '-b', 'big');
    await commitFiles(alice, dir, { 'big.bin': crypto.randomBytes(100 * 1024) }, 'big');
    trace = true;
    const push = await alice.git(dir, 'push', 'origin', 'big');
    trace = false;
    assert.equal(push.code, 0, push.stderr);
    // The blobs of big's packs as its repository's ref table lists them (the table drops a pack no
    // ref lists any more, and the PDS frees a blob no record references).
    const packs = await storedPacks(t, 'alice.test', url.split('/').pop()!, 'refs/heads/big');
    const cids = packs.flatMap((p) => p.parts ?? []).map((b) => b.ref.$link);
    assert.ok(cids.length > 0);
    const getBlob = (cid: string) =>
      fetch(`${t.net.pdsUrl}/xrpc/com.atproto.sync.getBlob?did=${t.dids['alice.test']}&cid=${cid}`);
    for (const cid of cids) assert.equal((await getBlob(cid)).status, 200);
    await alice.ok(dir, 'push', 'origin', '--delete', 'big');
    for (const cid of cids)
      assert.notEqual((await getBlob(cid)).status, 200, `blob ${cid} outlived its last reference`);
    assert.equal((await alice.ok(dir, 'ls-remote', url)).trim().split('\n').length, 2);
  });
});
