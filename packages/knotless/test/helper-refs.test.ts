import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commitFiles, newRepo, refsOf, useGitUser, repoMaker } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test']);
let appview: string | undefined;
const alice = useGitUser(t, 'alice.test', () => (appview === undefined ? {} : { KNOTLESS_APPVIEW: appview }));

const createRepo = repoMaker(alice, 'alice.test', 'refs');

describe('tags, mirrors and atomic pushes', () => {
  it('pushes lightweight and annotated tags, with --tags and --follow-tags, and fetches them back', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    await alice.ok(dir, 'tag', 'light');
    await alice.ok(dir, 'tag', '-a', 'v1', '-m', 'version one');
    await alice.ok(dir, 'push', 'origin', 'main', '--tags');
    await commitFiles(alice, dir, { a: '2' }, 'two');
    await alice.ok(dir, 'tag', '-a', 'v2', '-m', 'version two');
    await alice.ok(dir, 'tag', 'not-followed');
    const follow = await alice.git(dir, 'push', '--follow-tags', 'origin', 'main');
    assert.equal(follow.code, 0, follow.stderr);
    assert.match(follow.stderr, /\[new tag\] +v2 -> v2/);
    assert.doesNotMatch(follow.stderr, /not-followed/);

    const ls = await alice.ok(dir, 'ls-remote', url);
    const v1 = (await alice.ok(dir, 'rev-parse', 'v1')).trim();
    const v1commit = (await alice.ok(dir, 'rev-parse', 'v1^{}')).trim();
    assert.match(ls, new RegExp(`^${v1}\trefs/tags/v1$`, 'm'));
    assert.match(ls, new RegExp(`^${v1commit}\trefs/tags/v1\\^\\{\\}$`, 'm'));

    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.equal(
      await refsOf(alice, `${out}/c`, 'refs/tags/'),
      await refsOf(alice, dir, 'refs/tags/').then((r) => r.replace(/^.*not-followed\n/m, '')),
    );
    assert.equal((await alice.ok(`${out}/c`, 'cat-file', '-t', 'v2')).trim(), 'tag');
  });

  it('refuses to move an existing tag unless forced', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    await alice.ok(dir, 'tag', 't');
    await alice.ok(dir, 'push', 'origin', 'main', 't');
    await commitFiles(alice, dir, { a: '2' }, 'two');
    await alice.ok(dir, 'tag', '-f', 't');
    const res = await alice.git(dir, 'push', 'origin', 't');
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /\[rejected\] +t -> t \(already exists\)/);
    await alice.ok(dir, 'push', '--force', 'origin', 't');
  });

  it('mirrors a repository with --mirror and prunes deleted refs with --prune', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    for (const b of ['x', 'y', 'z/deep']) await alice.ok(dir, 'branch', b);
    await alice.ok(dir, 'tag', '-a', 'v1', '-m', 'v1');
    await alice.ok(dir, 'remote', 'remove', 'origin');
    await alice.ok(dir, 'push', '--mirror', url);

    const bare = alice.dir();
    await alice.ok(bare, 'clone', '-q', '--mirror', url, 'm.git');
    assert.equal(await refsOf(alice, `${bare}/m.git`), await refsOf(alice, dir));

    await alice.ok(dir, 'branch', '-D', 'x');
    await alice.ok(dir, 'push', '--prune', url, 'refs/heads/*:refs/heads/*');
    assert.doesNotMatch(await alice.ok(dir, 'ls-remote', url), /refs\/heads\/x$/m);
    await alice.ok(dir, 'branch', '-D', 'y');
    await alice.ok(dir, 'tag', '-d', 'v1');
    await alice.ok(dir, 'push', '--mirror', url);
    await alice.ok(`${bare}/m.git`, 'fetch', '-q', '--prune', 'origin', '+refs/*:refs/*');
    assert.equal(await refsOf(alice, `${bare}/m.git`), await refsOf(alice, dir));
  });

  it('applies --atomic pushes all or nothing', async () => {
    const url = await createRepo();
    const a = await newRepo(alice, url);
    await commitFiles(alice, a, { a: '1' }, 'one');
    await alice.ok(a, 'push', 'origin', 'main', 'main:other');
    // Someone else moves `other`, so a's next push of it is not a fast-forward.
    const b = alice.dir();
    await alice.ok(b, 'clone', '-q', url, 'c');
    await alice.ok(`${b}/c`, 'checkout', '-q', 'other');
    await commitFiles(alice, `${b}/c`, { b: 'theirs' }, 'theirs');
    await alice.ok(`${b}/c`, 'push', 'origin', 'other');
    const before = await alice.ok(a, 'ls-remote', url);

    await commitFiles(alice, a, { a: '2' }, 'two');
    await alice.ok(a, 'fetch', '-q');
    const rejected = await alice.git(a, 'push', '--atomic', 'origin', 'main', 'main:other', 'main:new');
    assert.notEqual(rejected.code, 0);
    assert.match(rejected.stderr, /atomic/);
    assert.equal(await alice.ok(a, 'ls-remote', url), before, 'an atomic push changed some refs');

    const ok = await alice.git(a, 'push', '--atomic', 'origin', 'main', 'main:new', 'main:new2');
    assert.equal(ok.code, 0, ok.stderr);
    const ls = await alice.ok(a, 'ls-remote', url);
    const head = (await alice.ok(a, 'rev-parse', 'main')).trim();
    for (const r of ['main', 'new', 'new2']) assert.match(ls, new RegExp(`^${head}\trefs/heads/${r}$`, 'm'));
  });

  it('answers --dry-run without writing anything', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    const res = await alice.git(dir, 'push', '--dry-run', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /\[new branch\] +main -> main/);
    assert.equal((await alice.ok(dir, 'ls-remote', url)).trim(), '');
  });

  it('prints the compare link after pushing a new branch, unless quiet or no appview is set', async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    appview = 'https://appview.example/';
    try {
      const first = await alice.git(dir, 'push', 'origin', 'main');
      assert.doesNotMatch(first.stderr, /pull request/, 'the default branch got a link');
      await alice.ok(dir, 'checkout', '-q', '-b', 'feature/x#1');
      await commitFiles(alice, dir, { b: '1' }, 'feature');
      const res = await alice.git(dir, 'push', 'origin', 'feature/x#1');
      assert.equal(res.code, 0, res.stderr);
      const name = url.split('/').pop()!;
      assert.ok(
        res.stderr.includes(
          `Create a pull request for 'feature/x#1' by visiting:\nknotless:      https://appview.example/alice.test/${name}/compare/main...feature/x%231\n`,
        ),
        res.stderr,
      );
      await alice.ok(dir, 'checkout', '-q', '-b', 'quiet');
      assert.doesNotMatch((await alice.git(dir, 'push', '-q', 'origin', 'quiet')).stderr, /pull request/);
      await commitFiles(alice, dir, { c: '1' }, 'again');
      assert.doesNotMatch(
        (await alice.git(dir, 'push', 'origin', 'quiet')).stderr,
        /pull request/,
        'an update got a link',
      );
    } finally {
      appview = undefined;
    }
    await alice.ok(dir, 'checkout', '-q', '-b', 'no-appview');
    assert.doesNotMatch((await alice.git(dir, 'push', 'origin', 'no-appview')).stderr, /pull request/);
  });
});
