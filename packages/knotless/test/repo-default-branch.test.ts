// `knotless repo default-branch`: the branch HEAD names is what a clone checks out, and the branch a
// push may not delete (as git's receive-pack refuses deleting the current branch); moving it is the
// owner's, on the same compare-and-swap loop as every ref write.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0' }));
const bob = useGitUser(t, 'bob.test');

describe('knotless repo default-branch', () => {
  it('shows HEAD, moves it to another branch, and then the old one can be deleted', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const none = await alice.knotless('repo', 'default-branch', 'site', '--json');
    assert.equal(none.code, 0, none.stderr);
    assert.deepEqual(JSON.parse(none.stdout), { repo: 'alice.test/site', branch: null });

    const dir = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, dir, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(dir, 'push', '-q', 'origin', 'main', 'main:refs/heads/trunk');
    assert.equal((await alice.knotless('repo', 'default-branch', 'site')).stdout, 'main\n');

    const refused = await alice.git(dir, 'push', 'origin', ':main');
    assert.notEqual(refused.code, 0, 'the current branch is not deleted');

    const moved = await alice.knotless('repo', 'default-branch', 'site', 'trunk', '--json');
    assert.equal(moved.code, 0, moved.stderr);
    assert.deepEqual(JSON.parse(moved.stdout), { repo: 'alice.test/site', branch: 'trunk', changed: true });
    const again = await alice.knotless('repo', 'default-branch', 'site', 'refs/heads/trunk');
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /HEAD already names trunk/);

    // Read by anyone, without logging in as the owner.
    assert.equal((await bob.knotless('repo', 'default-branch', 'alice.test/site')).stdout, 'trunk\n');
    const symref = await alice.ok(dir, 'ls-remote', '--symref', 'origin', 'HEAD');
    assert.match(symref, /^ref: refs\/heads\/trunk\tHEAD$/m);
    await alice.ok(dir, 'push', '-q', 'origin', ':main');
    const clone = alice.dir();
    await alice.ok(clone, 'clone', '-q', 'knotless://alice.test/site', 'c');
    assert.equal((await alice.ok(`${clone}/c`, 'symbolic-ref', 'HEAD')).trim(), 'refs/heads/trunk');
  });

  it('refuses a branch that does not exist, a non-branch, and anyone but the owner, each in one sentence', async () => {
    const missing = await alice.knotless('repo', 'default-branch', 'site', 'nope');
    assert.equal(missing.code, 17, missing.stderr);
    assert.equal(
      missing.stderr.trim(),
      'knotless: alice.test/site has no branch nope; push it first (git push origin nope).',
    );
    const tag = await alice.knotless('repo', 'default-branch', 'site', 'refs/tags/v1');
    assert.equal(tag.code, 2, tag.stderr);
    const other = await bob.knotless('repo', 'default-branch', 'alice.test/site', 'trunk');
    assert.equal(other.code, 5, other.stderr);
    assert.match(
      other.stderr,
      /^knotless: Only alice\.test can change the default branch of site; you are bob\.test\.\n$/,
    );
    const unknown = await alice.knotless('repo', 'default-branch', 'nothing-here');
    assert.equal(unknown.code, 7, unknown.stderr);
    assert.equal((await alice.knotless('repo', 'default-branch', 'site')).stdout, 'trunk\n');
  });
});
