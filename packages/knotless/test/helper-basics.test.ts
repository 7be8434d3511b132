import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser, repoMaker } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork();
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

const createRepo = repoMaker(alice, 'alice.test', 'basics');

describe('clone, fetch and push with standard git', () => {
  it('clones an empty repository, then pushes to it and fast-forwards', async () => {
    const url = await createRepo();
    const dir = alice.dir();
    const clone = await alice.git(dir, 'clone', url, 'c');
    assert.equal(clone.code, 0, clone.stderr);
    assert.match(clone.stderr, /cloned an empty repository/);
    const c = `${dir}/c`;
    const first = await commitFiles(alice, c, { 'README.md': '# hi\n' }, 'first');
    await alice.ok(c, 'push', '-u', 'origin', 'main');
    const second = await commitFiles(alice, c, { 'README.md': '# hi\nmore\n' }, 'second');
    const push = await alice.git(c, 'push');
    assert.equal(push.code, 0, push.stderr);
    assert.match(push.stderr, new RegExp(`${first.slice(0, 7)}\\.\\.${second.slice(0, 7)} +main -> main`));

    const other = alice.dir();
    await alice.ok(other, 'clone', '-q', url, 'd');
    assert.equal((await alice.ok(`${other}/d`, 'rev-parse', 'HEAD')).trim(), second);
    assert.equal((await alice.ok(`${other}/d`, 'symbolic-ref', 'HEAD')).trim(), 'refs/heads/main');
    assert.equal((await alice.ok(`${other}/d`, 'fsck', '--full')).trim(), '');
  });

  it('clones the default branch the first push named, even when it is not main', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await alice.ok(dir, 'checkout', '-q', '-b', 'trunk');
    await commitFiles(alice, dir, { a: '1' }, 'on trunk');
    await alice.ok(dir, 'branch', 'other');
    await alice.ok(dir, 'push', 'origin', 'other', 'trunk');
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.equal((await alice.ok(`${out}/c`, 'symbolic-ref', 'HEAD')).trim(), 'refs/heads/trunk');
  });

  it('rejects a non-fast-forward push unless forced', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    await commitFiles(alice, dir, { a: '2' }, 'two');
    await alice.ok(dir, 'push', 'origin', 'main');
    await alice.ok(dir, 'reset', '-q', '--hard', 'HEAD~1');
    const rewritten = await commitFiles(alice, dir, { a: '3' }, 'three');
    const rejected = await alice.git(dir, 'push', 'origin', 'main');
    assert.notEqual(rejected.code, 0);
    assert.match(rejected.stderr, /\[rejected\] +main -> main \(non-fast-forward\)/);
    const forced = await alice.git(dir, 'push', '--force', 'origin', 'main');
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stderr, /\+ .+ main -> main \(forced update\)/);
    assert.match(await alice.ok(dir, 'ls-remote', url), new RegExp(`^${rewritten}\trefs/heads/main$`, 'm'));
  });

  it('says "fetch first" when someone else pushed, and fetches their work', async () => {
    const url = await createRepo();
    const a = await newRepo(alice, url);
    await commitFiles(alice, a, { a: '1' }, 'one');
    await alice.ok(a, 'push', '-u', 'origin', 'main');
    const b = alice.dir();
    await alice.ok(b, 'clone', '-q', url, 'c');
    const theirs = await commitFiles(alice, `${b}/c`, { b: 'theirs' }, 'theirs');
    await alice.ok(`${b}/c`, 'push');
    await commitFiles(alice, a, { a: 'mine' }, 'mine');
    const rejected = await alice.git(a, 'push');
    assert.notEqual(rejected.code, 0);
    assert.match(rejected.stderr, /\[rejected\] +main -> main \(fetch first\)/);
    await alice.ok(a, 'fetch');
    assert.equal((await alice.ok(a, 'rev-parse', 'origin/main')).trim(), theirs);
    await alice.ok(a, 'rebase', '-q', 'origin/main');
    await alice.ok(a, 'push');
  });

  it('honours --force-with-lease with the right and a wrong expectation', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    const one = await commitFiles(alice, dir, { a: '1' }, 'one');
    await alice.ok(dir, 'push', '-u', 'origin', 'main');
    await alice.ok(dir, 'commit', '-q', '--amend', '-m', 'amended');
    const wrong = await alice.git(dir, 'push', `--force-with-lease=main:${'1'.repeat(40)}`);
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /\[rejected\] +main -> main \(stale info\)/);
    const right = await alice.git(dir, 'push', `--force-with-lease=main:${one}`);
    assert.equal(right.code, 0, right.stderr);
    const withIncludes = await commitFiles(alice, dir, { a: '2' }, 'two');
    await alice.ok(dir, 'push', '--force-with-lease', '--force-if-includes');
    assert.match(await alice.ok(dir, 'ls-remote', url, 'main'), new RegExp(`^${withIncludes}`));
    await commitFiles(alice, dir, { a: '3' }, 'three');
    const mustNotExist = await alice.git(dir, 'push', `--force-with-lease=main:`, 'origin', 'main:main');
    assert.notEqual(mustNotExist.code, 0);
    assert.match(mustNotExist.stderr, /stale info/);
  });

  it('deletes branches with :b and --delete', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    await alice.ok(dir, 'push', 'origin', 'main', 'main:b1', 'main:b2');
    await alice.ok(dir, 'push', 'origin', ':b1');
    await alice.ok(dir, 'push', 'origin', '--delete', 'b2');
    assert.deepEqual(
      (await alice.ok(dir, 'ls-remote', url))
        .trim()
        .split('\n')
        .map((l) => l.split('\t')[1]),
      ['HEAD', 'refs/heads/main'],
    );
  });

  it("refuses a push to another account's repository with a clear message", async () => {
    const url = await createRepo();
    const dir = await newRepo(bob, url);
    await commitFiles(bob, dir, { a: 'bob was here' }, 'one');
    const res = await bob.git(dir, 'push', 'origin', 'main');
    assert.notEqual(res.code, 0);
    assert.match(
      res.stderr,
      /knotless: permission denied: you are bob\.test, and only alice\.test can push to alice\.test\/basics-\d+/,
    );
    assert.match(res.stderr, /\[remote rejected\] +main -> main \(permission denied\)/);
    assert.equal((await alice.ok(dir, 'ls-remote', url)).trim(), '');
  });

  it('refuses to push a SHA-256 repository, which it cannot store, and writes nothing', async () => {
    const url = await createRepo();
    const dir = alice.dir();
    await alice.ok(dir, 'init', '-q', '--object-format=sha256', '-b', 'main', 'r');
    await commitFiles(alice, `${dir}/r`, { a: '1' }, 'sha-256');
    const res = await alice.git(`${dir}/r`, 'push', url, 'main');
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /knotless: This repository uses SHA-256 object names/);
    assert.equal((await alice.ok(dir, 'ls-remote', url)).trim(), '');
  });

  it('fails clearly for a repository that does not exist and a malformed URL', async () => {
    const dir = alice.dir();
    const missing = await alice.git(dir, 'clone', 'knotless://alice.test/nope', 'x');
    assert.notEqual(missing.code, 0);
    assert.match(
      missing.stderr,
      /knotless: alice\.test\/nope does not exist; create it with `knotless repo create nope`/,
    );
    const bad = await alice.git(dir, 'clone', 'knotless://alice.test/a/b', 'y');
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /knotless: "knotless:\/\/alice\.test\/a\/b" is not a knotless URL/);
  });
});
