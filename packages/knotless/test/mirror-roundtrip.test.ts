import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { generateRepo } from './helpers/gen-repo.ts';
import { refsOf, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');

describe('a generated repository survives a mirror round trip', () => {
  it('push --mirror then clone --mirror gives identical refs and a clean fsck', async () => {
    const src = path.join(alice.dir(), 'src.git');
    // The default size: 2,000 commits, 100 merges, 20 branches, 300 tags, binary files, odd ref names.
    await generateRepo(src, { bare: true });
    assert.equal((await alice.knotless('repo', 'create', 'generated')).code, 0);
    const url = 'knotless://alice.test/generated';
    const push = await alice.git(src, 'push', '--mirror', url);
    assert.equal(push.code, 0, push.stderr);

    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', '--mirror', url, 'm.git');
    const clone = `${out}/m.git`;
    const expected = await refsOf(alice, src);
    assert.ok(expected.split('\n').length > 300);
    assert.equal(await refsOf(alice, clone), expected);
    const fsck = await alice.git(clone, 'fsck', '--full', '--strict');
    assert.equal(fsck.code, 0, fsck.stderr);
    assert.doesNotMatch(fsck.stdout + fsck.stderr, /error|missing|broken/);
    assert.equal((await alice.ok(clone, 'symbolic-ref', 'HEAD')).trim(), 'refs/heads/main');
  });
});
