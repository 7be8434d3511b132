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
    // git-lfs shows its transfer agent's stderr in its trace only.
    const push = await runProcess('git', ['push', 'origin', 'main'], {
      env: { ...alice.env, GIT_TRACE: '1' },
      cwd: dir,
    });
    assert.equal(push.code, 0, push.stderr);
    const said = push.stderr.split('\n').filter((l) => l.includes('blob uploads'));
    assert.equal(said.length, 1, push.stderr);
    assert.match(
      said[0]!,
      new RegExp(`knotless: LFS object [0-9a-f]{12} \\(${size} bytes\\) needs 102 blob uploads\\.$`),
    );
  });
});
