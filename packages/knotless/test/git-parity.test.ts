import assert from 'node:assert/strict';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { commitFiles } from './helpers/git.ts';
import { CAUGHT_UP, OTHER, useParity } from './helpers/parity.ts';

// git pushes to knotless and to a bare repository (helpers/parity.ts): the same outcome. Fetches and
// clones: git-parity-fetch.test.ts.
const { plain, warm, other, proxy, ready, carriedByAgent, stopAgent, remotes, lsRemote, both } = useParity();

describe('git push to knotless and to a bare repository: the same outcome', () => {
  after(() => stopAgent());
  it('a part "@" in a ref name (refs/heads/@) is pushed, listed and cloned as git does', async () => {
    // Such a ref used to be written, then ignored by every reader as an invalid name.
    const { bare, knotless } = await both(plain, (dir) => [
      ['push', '--porcelain', 'origin', 'main', 'main:refs/heads/@', 'main:refs/tags/@/v'],
      ['clone', '-q', '--mirror', 'URL', `${dir}/m.git`],
      ['-C', `${dir}/m.git`, 'for-each-ref', '--format=%(objectname) %(refname)'],
    ]);
    assert.equal(knotless, bare);
    assert.match(knotless, /refs\/heads\/@\n/);
  });

  it('odd but valid ref names, one too long for a record key, round-trip as through a bare repository', async () => {
    const long = `refs/heads/${'p'.repeat(200)}/${'q'.repeat(200)}/${'r'.repeat(200)}`;
    const odd = [
      'refs/heads/ünï/cödé',
      'refs/heads/a_b',
      'refs/heads/_5F_.x',
      'refs/heads/x#y%z+w',
      "refs/heads/q'u,o;te",
      'refs/heads/Case',
      'refs/heads/case',
      'refs/heads/emoji😀',
      'refs/notes/commits',
      'refs/for/main',
      'refs/heads/HEAD',
      long,
    ];
    const { bare, knotless } = await both(plain, (dir) => [
      ['push', '--porcelain', 'origin', 'main', ...odd.map((r) => `main:${r}`)],
      ['push', '--porcelain', 'origin', `main:${long}`],
      ['clone', '-q', '--mirror', 'URL', `${dir}/m.git`],
      ['-C', `${dir}/m.git`, 'for-each-ref', '--format=%(objectname) %(refname)'],
      ['push', '--porcelain', 'origin', `:${long}`, ':refs/heads/ünï/cödé'],
      ['-C', `${dir}/m.git`, 'fetch', '-q', '--prune', 'origin'],
      ['-C', `${dir}/m.git`, 'for-each-ref', '--format=%(objectname) %(refname)'],
    ]);
    assert.equal(knotless, bare);
    assert.ok(knotless.includes(` ${long}\n`), knotless);
  });

  it('a ref inside another (refs/heads/a and refs/heads/a/b) is refused as git refuses it', async () => {
    for (const user of [plain, warm]) {
      await ready(user);
      // No git repository can hold both: a clone of such a remote would fail.
      const { bare, knotless } = await both(user, () => [
        ['push', '--porcelain', 'origin', 'main', 'main:refs/heads/a/b', 'main:refs/heads/c'],
        [
          'push',
          '--porcelain',
          'origin',
          'main:refs/heads/a',
          'main:refs/heads/c/d',
          'main:refs/heads/a/b/c',
        ],
        ['push', '--porcelain', 'origin', 'main:refs/heads/x', 'main:refs/heads/x/y'],
        ['push', '--porcelain', '--atomic', 'origin', 'main:refs/heads/n1', 'main:refs/heads/c/e'],
        // Deleting c makes room for c/d in the same push.
        ['push', '--porcelain', 'origin', ':refs/heads/c', 'main:refs/heads/c/d'],
      ]);
      assert.equal(knotless, bare, user === warm ? 'through the agent' : 'without an agent');
      assert.match(knotless, /\[remote rejected\] \(failed to update ref\)/);
    }
  });

  it('a non-commit object pushed to a branch is refused as receive-pack refuses it; tags may hold any object', async () => {
    for (const user of [plain, warm]) {
      await ready(user);
      const { bare, knotless } = await both(
        user,
        () => [
          ['push', '--porcelain', 'origin', 'main'],
          ['push', '--porcelain', 'origin', 'v1:refs/heads/tagbranch', 'v1:refs/tags/renamed'],
          ['push', '--porcelain', 'origin', 'HEAD^{tree}:refs/heads/tree', 'HEAD^{tree}:refs/tags/tree'],
          ['push', '--porcelain', '--atomic', 'origin', 'HEAD^{tree}:refs/heads/t2', 'main:refs/heads/t3'],
          // A dry run does not reach receive-pack, so git shows the pushes it would make.
          ['push', '--porcelain', '--dry-run', 'origin', 'v1:refs/heads/t4', ':main'],
          [
            'push',
            '--porcelain',
            '--dry-run',
            '--atomic',
            'origin',
            'v1:refs/heads/t4',
            'main:refs/heads/t5',
          ],
        ],
        async (u, dir) => void (await u.ok(dir, 'tag', '-a', 'v1', '-m', 'v1')),
      );
      assert.equal(knotless, bare, user === warm ? 'through the agent' : 'without an agent');
      assert.match(knotless, /\[remote rejected\] \(failed to update ref\)/);
    }
  });

  it('deleting the branch HEAD names is refused as git refuses it; receive.denyDeleteCurrent=ignore allows it', async () => {
    for (const user of [plain, warm]) {
      await ready(user);
      const { bare, knotless } = await both(user, () => [
        ['push', '--porcelain', 'origin', 'main', 'main:b'],
        ['push', '--porcelain', 'origin', ':main'],
        ['push', '--porcelain', '--force', '--delete', 'origin', 'main'],
        ['push', '--porcelain', '--atomic', 'origin', ':main', ':b'],
        ['push', '--porcelain', 'origin', ':b'],
      ]);
      assert.equal(knotless, bare, user === warm ? 'through the agent' : 'without an agent');
      assert.match(knotless, /\(deletion of the current branch prohibited\)/);

      // The pusher's config stands in for the server's, which knotless does not have.
      const urls = await remotes(user);
      const dir = user.dir();
      await user.ok(dir, 'init', '-q');
      await commitFiles(user, dir, { a: '1' }, 'one');
      await user.ok(dir, 'push', '-q', urls.knotless, 'main', 'main:b');
      const refused = await user.git(dir, 'push', urls.knotless, ':main');
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /receive\.denyDeleteCurrent=ignore/);
      await user.ok(dir, '-c', 'receive.denyDeleteCurrent=ignore', 'push', urls.knotless, ':main');
      // HEAD now names a missing branch: git's own warning, as for such a bare repository.
      const clone = await user.git(user.dir(), 'clone', urls.knotless, 'c');
      assert.equal(clone.code, 0, clone.stderr);
      assert.match(clone.stderr, /warning: remote HEAD refers to nonexistent ref, unable to checkout/);
    }
  });

  it('--signed and push options stop with one sentence; --signed=if-asked pushes unsigned, as to a bare repository', async () => {
    const { bare, knotless } = await both(plain, () => [
      ['push', '--porcelain', '--signed', 'origin', 'main'],
      ['push', '--porcelain', '--signed=if-asked', 'origin', 'main'],
      ['push', '--porcelain', '-o', 'ci.skip', 'origin', 'main:b'],
    ]);
    // git warns of the bare repository; the helper says the same in its own words.
    const unsigned =
      'warning: not sending a push certificate since the receiving end does not support --signed push\n';
    assert.ok(bare.includes(unsigned));
    assert.equal(knotless, bare.replace(unsigned, ''));
    const urls = await remotes(plain);
    const dir = plain.dir();
    await plain.ok(dir, 'init', '-q');
    await commitFiles(plain, dir, { a: '1' }, 'one');
    const res = await plain.git(dir, 'push', '--signed', urls.knotless, 'main');
    assert.equal(res.code, 128);
    assert.match(res.stderr, /^knotless: knotless does not support signed pushes/m);
    const options = await plain.git(dir, 'push', '-o', 'ci.skip', urls.knotless, 'main');
    assert.equal(options.code, 128);
    assert.match(options.stderr, /^knotless: knotless does not support push options/m);
    const ifAsked = await plain.git(dir, 'push', '--signed=if-asked', urls.knotless, 'main');
    assert.equal(ifAsked.code, 0, ifAsked.stderr);
    assert.match(ifAsked.stderr, /^knotless: warning: not sending a push certificate/m);
  });

  for (const [label, user] of [
    ['without an agent', plain],
    ['through the agent', warm],
  ] as const) {
    it(`leases, deletes, --porcelain and --atomic after another machine's push (${label})`, async (tc) => {
      await ready(user);
      const { bare, knotless, stderr } = await both(
        user,
        (dir) => [
          ['push', '--porcelain', 'origin', 'main', 'main:b2', 'main:b3', 'v1'],
          // The other machine moves main and b2; this one still has the old values.
          [OTHER, '-C', path.join(dir, 'o'), 'push', '--porcelain', 'URL', 'HEAD:main', 'HEAD:b2'],
          ['push', '--porcelain', '--force-with-lease', 'origin', 'main'],
          // From here on the agent's view has the other machine's push (the steps test leases and
          // deletes, not the stream's delay, which the step above and agent-stale.test.ts do).
          [CAUGHT_UP],
          ['push', '--porcelain', '--force-with-lease=b3:HEAD~1', 'origin', 'HEAD~1:b3'],
          ['push', '--porcelain', '--force-with-lease=b4:', 'origin', 'HEAD:b4'],
          ['push', '--porcelain', '--force-with-lease=b4:', 'origin', 'HEAD:b4'],
          ['push', '--porcelain', '--atomic', 'origin', 'HEAD:b5', 'HEAD:b6'],
          ['push', '--porcelain', 'origin', ':b3', ':b4', ':nonexistent'],
          ['fetch', '-q', 'origin'],
          // main is now their commit, of which ours is an ancestor: not a fast-forward, so nothing lands.
          ['push', '--porcelain', '--atomic', 'origin', 'HEAD:main', 'HEAD:b7'],
          ['push', '--porcelain', '--force-with-lease', '--force-if-includes', 'origin', 'HEAD:b2'],
          ['push', '--porcelain', '--force-with-lease', 'origin', 'HEAD:main'],
          ['push', '--porcelain', '--prune', 'origin', 'refs/heads/*:refs/heads/*'],
        ],
        async (u, dir) => {
          await u.ok(dir, 'tag', '-a', 'v1', '-m', 'v1');
          await commitFiles(u, dir, { a: '2' }, 'two');
          // "o": the other machine's clone, made from this repository so it shares its history.
          await u.ok(dir, 'clone', '-q', dir, 'o');
          await commitFiles(u, path.join(dir, 'o'), { b: 'theirs' }, 'theirs');
        },
      );
      assert.match(bare, /\[rejected\] \(stale info\)/);
      tc.diagnostic(knotless === bare ? 'the transcript of the bare repository' : 'the stale-view outcome');
      if (knotless === bare) return;
      // Through the agent, git decides from the agent's view at once: when its event stream had not
      // delivered the other machine's push yet, git judged main "up to date" locally and sent
      // nothing; the helper's one read before exiting found main moved, said so, and failed the push
      // (never "up to date" with exit 0). Nothing else may differ, and the remote is as for the bare.
      assert.equal(label, 'through the agent', 'without an agent the transcripts must be equal');
      const stale = bare.replace(
        /^(\$ git push --porcelain --force-with-lease origin main -> 1\nTo URL\n)!\trefs\/heads\/main:refs\/heads\/main\t\[rejected\] \(stale info\)\n/m,
        '$1=\trefs/heads/main:refs/heads/main\t[up to date]\n',
      );
      assert.notEqual(stale, bare, 'the lease step of the bare transcript');
      assert.equal(knotless, stale);
      assert.match(
        stderr[2]!,
        /^knotless: .* changed while git was deciding this push \(.*refs\/heads\/main/m,
      );
    });
  }

  it('--dry-run writes nothing, through the agent or not: only reads reach the PDS', async () => {
    for (const user of [plain, warm]) {
      await ready(user);
      const { knotless: url } = await remotes(user);
      const dir = user.dir();
      await user.ok(dir, 'init', '-q');
      await user.ok(dir, 'remote', 'add', 'origin', url);
      await commitFiles(user, dir, { a: '1' }, 'one');
      await user.ok(dir, 'push', '-q', 'origin', 'main', 'main:gone');
      await commitFiles(user, dir, { a: '2' }, 'two');
      await user.ok(dir, 'tag', '-a', 'v2', '-m', 'v2');
      const before = await lsRemote(other, url);
      proxy().reset();
      for (const flags of [[], ['--atomic'], ['--mirror'], ['--follow-tags', '--force']]) {
        const res = await user.git(
          dir,
          'push',
          '--dry-run',
          ...flags,
          'origin',
          ...(flags.includes('--mirror') ? [] : ['main', 'main:new', ':gone']),
        );
        assert.equal(res.code, 0, res.stderr);
      }
      const writes = proxy()
        .requests.map((r) => r.nsid)
        .filter(
          (x) =>
            x === undefined ||
            !/^com\.atproto\.(repo\.(listRecords|getRecord|describeRepo)|sync\.(getLatestCommit|getRecord)|server\.|identity\.)/.test(
              x,
            ),
        );
      assert.deepEqual(writes, [], 'a dry run sent more than reads');
      if (user === warm) carriedByAgent(proxy().requests);
      assert.equal(await lsRemote(other, url), before);
    }
  });
});
