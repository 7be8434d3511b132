import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, repoMaker, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

/** A small blob limit, so that an object of a few MiB splits into several blobs. */
const BLOB_LIMIT = 1024 * 1024;
const t = useNetwork(['alice.test'], { blobUploadLimit: BLOB_LIMIT });
const alice = useGitUser(t, 'alice.test');
const createRepo = repoMaker(alice, 'alice.test', 'lfs');

/** The account's dev.knotless.lfs records, as its PDS lists them. */
async function lfsRecords(handle: string): Promise<Array<{ uri: string; value: Record<string, unknown> }>> {
  const q = new URLSearchParams({ repo: t.dids[handle]!, collection: 'dev.knotless.lfs', limit: '100' });
  const res = await fetch(`${t.pdsOf[handle]}/xrpc/com.atproto.repo.listRecords?${q}`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { records: Array<{ uri: string; value: Record<string, unknown> }> }).records;
}

/** `knotless` run in `cwd` as `user`. */
const knotlessIn = (user: GitUser, cwd: string, ...args: string[]) =>
  runProcess(process.execPath, [KNOTLESS_BIN, ...args], { env: user.env, cwd });

/** A repository with git-lfs set up for knotless, tracking *.bin. */
async function lfsRepo(user: GitUser, url: string): Promise<string> {
  const dir = await newRepo(user, url);
  // git-lfs's own set-up, once per user (its filters and hooks), as with any LFS server.
  await user.ok(dir, 'lfs', 'install');
  const installed = await knotlessIn(user, dir, 'lfs', 'install');
  assert.equal(installed.code, 0, installed.stderr);
  await user.ok(dir, 'lfs', 'track', '*.bin');
  return dir;
}

describe('Git LFS objects stored in the PDS', () => {
  it('pushes LFS files and clones them back: the files, not their pointers, and git lfs fsck is clean', async () => {
    const url = await createRepo();
    const dir = await lfsRepo(alice, url);
    const big = crypto.randomBytes(3 * BLOB_LIMIT + 4321);
    const small = crypto.randomBytes(1000);
    await commitFiles(alice, dir, { 'big.bin': big, 'small.bin': small, 'readme.txt': 'hi\n' }, 'lfs files');
    const push = await runProcess('git', ['push', 'origin', 'main'], {
      env: { ...alice.env, GIT_TRACE: '1' },
      cwd: dir,
    });
    assert.equal(push.code, 0, push.stderr);
    // git-lfs asked no LFS server anything (no ssh, no HTTP): the transfer agent did it all.
    assert.doesNotMatch(push.stderr, /exec: ssh|HTTP: /);
    assert.match(push.stderr, /starting transfer adapter "knotless"/);
    // big.bin went up in four blobs (three of the limit and the rest), small.bin in one.
    const records = await lfsRecords('alice.test');
    const oid = (b: Buffer) => crypto.createHash('sha256').update(b).digest('hex');
    const bigRecord = records.find((r) => r.value['oid'] === oid(big));
    assert.deepEqual(
      (bigRecord?.value['blobs'] as Array<{ size: number }>).map((b) => b.size),
      [BLOB_LIMIT, BLOB_LIMIT, BLOB_LIMIT, 4321],
    );
    assert.equal((records.find((r) => r.value['oid'] === oid(small))?.value['blobs'] as unknown[]).length, 1);

    const out = alice.dir();
    const clone = await alice.git(out, 'clone', url, 'c');
    assert.equal(clone.code, 0, clone.stderr);
    const c = path.join(out, 'c');
    assert.ok(fs.readFileSync(path.join(c, 'big.bin')).equals(big));
    assert.ok(fs.readFileSync(path.join(c, 'small.bin')).equals(small));
    const files = await alice.ok(c, 'lfs', 'ls-files', '--long');
    assert.match(files, /\* big\.bin/);
    assert.match(files, /\* small\.bin/);
    assert.equal((await alice.git(c, 'lfs', 'fsck')).code, 0);
  });
});
