import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

/** A tiny blob limit, so that an object needing over 100 blob uploads stays small. */
const BLOB_LIMIT = 4096;
const t = useNetwork(['alice.test'], { blobUploadLimit: BLOB_LIMIT });
const alice = useGitUser(t, 'alice.test');
const createRepo = repoMaker(alice, 'alice.test', 'lfs-budget');

describe('LFS upload budgets', () => {
  it('says in one line how many blob uploads an object needs when it is over 100', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await alice.ok(dir, 'lfs', 'install');
    const installed = await runProcess(process.execPath, [KNOTLESS_BIN, 'lfs', 'install'], {
      env: alice.env,
      cwd: dir,
    });
    assert.equal(installed.code, 0, installed.stderr);
    await alice.ok(dir, 'lfs', 'track', '*.bin');
    const size = 101 * BLOB_LIMIT + 1;
    await commitFiles(
      alice,
      dir,
      { 'many.bin': crypto.randomBytes(size), 'few.bin': crypto.randomBytes(3 * BLOB_LIMIT) },
      'lfs',
    );
    // A plain push, no GIT_TRACE: git-lfs keeps its transfer agent's stderr for its trace, so the
    // line reaches the push's stderr only by the agent writing it to git-lfs's own. That is a pipe
    // here, as in a terminal's pipeline or CI (Node's own child pipes are sockets, which cannot be
    // opened again through /proc: bash makes the pipe).
    const push = await runProcess('bash', ['-c', 'set -o pipefail; git push origin main 2>&1 | cat'], {
      env: alice.env,
      cwd: dir,
    });
    assert.equal(push.code, 0, push.stdout);
    assert.equal(push.stderr, '');
    // The one object over 100, named by its oid's first 12 digits.
    const oid = /^([0-9a-f]{64}) [*-] many\.bin$/m.exec(
      await alice.ok(dir, 'lfs', 'ls-files', '--long'),
    )?.[1];
    assert.ok(oid !== undefined);
    const said = push.stdout.split('\n').filter((l) => l.includes('blob uploads'));
    assert.deepEqual(said, [
      `knotless: LFS object ${oid.slice(0, 12)} (${size} bytes) needs 102 blob uploads.`,
    ]);
  });
});

describe('push upload budgets', () => {
  it('says in one line how many blob uploads a push needs when it is over 100, and nothing under', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    // Random bytes do not compress: about 101 blobs' worth of pack, and then a few.
    await commitFiles(alice, dir, { 'many.dat': crypto.randomBytes(101 * BLOB_LIMIT + 1) }, 'many');
    const many = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(many.code, 0, many.stderr);
    const said = many.stderr.split('\n').filter((l) => l.includes('blob uploads'));
    assert.equal(said.length, 1, many.stderr);
    const m = /^knotless: (\d+) bytes of packs need (\d+) blob uploads \(at most 4096 bytes each\)\.$/.exec(
      said[0]!,
    );
    assert.ok(m !== null, said[0]);
    // Each pack in parts of at most the limit: at least the bytes over the limit, rounded up.
    assert.ok(Number(m[2]) >= Math.ceil(Number(m[1]) / BLOB_LIMIT), said[0]);
    assert.ok(Number(m[2]) > 100 && Number(m[1]) > 101 * BLOB_LIMIT, said[0]);

    await commitFiles(alice, dir, { 'few.dat': crypto.randomBytes(3 * BLOB_LIMIT) }, 'few');
    const few = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(few.code, 0, few.stderr);
    assert.doesNotMatch(few.stderr, /blob uploads/);
  });
});
