import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { type GitUser } from './helpers/git.ts';
import { useParity } from './helpers/parity.ts';

// Shallow and partial clones and fetches through knotless://, against a bare repository over
// file:// (git's own upload-pack) as the reference: the same transcript (refs, history reached,
// `.git/shallow`, `git fsck`), directly and through the warm agent.
const { plain, warm, ready, stopAgent, both } = useParity();

/**
 * The reference serves what the appview's plain-git clone serves (git/http-backend.ts): filters, and
 * wants of any object its refs reach.
 */
async function serveFilters(u: GitUser, dir: string): Promise<void> {
  const url = (await u.ok(dir, 'remote', 'get-url', 'origin')).trim();
  if (!url.startsWith('file://')) return;
  const bare = url.slice('file://'.length);
  await u.ok(bare, 'config', 'uploadpack.allowFilter', 'true');
  await u.ok(bare, 'config', 'uploadpack.allowReachableSHA1InWant', 'true');
}

/**
 * Four more commits on main, a day apart, author and committer (written by hand: the users' dates are
 * fixed, and --shallow-since reads the committer's), each changing `f`: blobs a partial clone lacks
 * and fetches later. The tag `old` is on the first of them.
 */
async function history(u: GitUser, dir: string): Promise<void> {
  let parent = (await u.ok(dir, 'rev-parse', 'HEAD')).trim();
  for (let i = 2; i <= 5; i++) {
    fs.writeFileSync(path.join(dir, 'f'), `${i}\n`);
    await u.ok(dir, 'add', 'f');
    const tree = (await u.ok(dir, 'write-tree')).trim();
    const when = `${1577836800 + (i - 1) * 86400} +0000`;
    const who = `alice.test <alice.test@example.com> ${when}`;
    const file = path.join(dir, '.git', 'commit.txt');
    fs.writeFileSync(file, `tree ${tree}\nparent ${parent}\nauthor ${who}\ncommitter ${who}\n\nc${i}\n`);
    parent = (await u.ok(dir, 'hash-object', '-t', 'commit', '-w', file)).trim();
    await u.ok(dir, 'update-ref', 'refs/heads/main', parent);
    if (i === 2) await u.ok(dir, 'tag', 'old');
  }
  await serveFilters(u, dir);
}

/** What a clone holds, as a comparison sees it. */
const state = (c: string): string[][] => [
  ['-C', c, 'rev-parse', '--is-shallow-repository'],
  ['-C', c, 'for-each-ref', '--format=%(objectname) %(refname)'],
  // A shallow commit shows no parents: the log tells `.git/shallow`'s content.
  ['-C', c, 'log', '--format=%H %P %s', '--all'],
  ['-C', c, 'fsck', '--no-progress', '--connectivity-only'],
  ['-C', c, 'show', '--format=%H', '--no-patch', '--no-abbrev'],
];

for (const [who, user] of [
  ['directly', plain],
  ['through the agent', warm],
] as const) {
  describe(`shallow and partial clones through knotless:// ${who}: the same as from a bare repository`, () => {
    after(() => stopAgent());
    it('clone --depth, --shallow-since, --shallow-exclude, fetch --deepen and --unshallow, then a push from the shallow clone', async () => {
      await ready(user);
      const c = (dir: string, name: string) => path.join(dir, name);
      const { bare, knotless, stderr } = await both(
        user,
        (dir) => [
          ['push', '--porcelain', 'origin', 'main', 'old'],
          // Requests upload-pack refuses: an exclusion naming no ref, a date after every commit.
          ['clone', '-q', '--shallow-exclude', 'nosuchref', 'URL', c(dir, 'bad-excl')],
          ['clone', '-q', '--shallow-since', '2031-01-01', 'URL', c(dir, 'bad-since')],
          ['clone', '-q', '--depth', '1', '--no-local', 'URL', c(dir, 'd1')],
          ...state(c(dir, 'd1')),
          ['-C', c(dir, 'd1'), 'cat-file', '-p', 'HEAD'],
          ['clone', '-q', '--shallow-since', '2020-01-04', 'URL', c(dir, 'since')],
          ...state(c(dir, 'since')),
          ['clone', '-q', '--shallow-exclude', 'old', 'URL', c(dir, 'excl')],
          ...state(c(dir, 'excl')),
          ['-C', c(dir, 'd1'), 'fetch', '-q', '--deepen', '2'],
          ...state(c(dir, 'd1')),
          ['-C', c(dir, 'd1'), 'commit', '-q', '--allow-empty', '-m', 'from shallow'],
          ['-C', c(dir, 'd1'), 'push', '--porcelain', 'origin', 'HEAD:main'],
          ['-C', c(dir, 'since'), 'fetch', '-q'],
          ...state(c(dir, 'since')),
          ['-C', c(dir, 'since'), 'fetch', '-q', '--unshallow'],
          ...state(c(dir, 'since')),
          ['-C', c(dir, 'since'), 'log', '--format=%s', 'origin/main'],
        ],
        history,
      );
      assert.equal(knotless, bare);
      // Refused in upload-pack's own words, one line, as git prints a bare repository's refusal.
      assert.match(knotless, /--shallow-exclude nosuchref URL DIR\/bad-excl -> 128\n/);
      assert.match(knotless, /--shallow-since 2031-01-01 URL DIR\/bad-since -> 128\n/);
      assert.match(stderr[1]!, /^knotless: git upload-pack refused the request: .*deepen-not nosuchref\.$/m);
      assert.match(
        stderr[2]!,
        /^knotless: git upload-pack refused the request: no commits selected for shallow requests\.$/m,
      );
      for (const e of stderr.slice(1, 3)) {
        assert.doesNotMatch(e, /internal error|^knotless:\s+at /m);
        assert.equal(e.split('\n').filter((l) => l.startsWith('knotless:')).length, 1, e);
      }
      assert.match(knotless, /rev-parse --is-shallow-repository -> 0\ntrue\n/);
      assert.match(knotless, /--shallow-since 2020-01-04 URL DIR\/since -> 0\n/);
      assert.match(
        knotless,
        /--unshallow -> 0\n\$ git -C DIR\/since rev-parse --is-shallow-repository -> 0\nfalse\n/,
      );
    });

    it('clone --filter=blob:none, blob:limit and tree:0; log -p, checkout of an old commit, blame, diff and sparse-checkout fetch what they lack', async () => {
      await ready(user);
      const c = (dir: string, name: string) => path.join(dir, name);
      const missing = (d: string) => [
        '-C',
        d,
        'rev-list',
        '--objects',
        '--all',
        '--missing=print',
        '--quiet',
      ];
      const { bare, knotless } = await both(
        user,
        (dir) => [
          ['push', '--porcelain', 'origin', 'main', 'old'],
          ['clone', '-q', '--no-checkout', '--filter=blob:none', 'URL', c(dir, 'bn')],
          ['-C', c(dir, 'bn'), 'config', 'remote.origin.promisor'],
          ['-C', c(dir, 'bn'), 'config', 'remote.origin.partialclonefilter'],
          missing(c(dir, 'bn')),
          ['-C', c(dir, 'bn'), 'checkout', '-q', 'main'],
          ['-C', c(dir, 'bn'), 'log', '-p', '--format=%s', 'old'],
          ['-C', c(dir, 'bn'), 'checkout', '-q', 'old'],
          ['-C', c(dir, 'bn'), 'blame', '-s', 'a', 'main'],
          ['-C', c(dir, 'bn'), 'diff', 'main~3', 'main~1'],
          missing(c(dir, 'bn')),
          ...state(c(dir, 'bn')),
          ['clone', '-q', '--filter=blob:limit=1', 'URL', c(dir, 'bl')],
          missing(c(dir, 'bl')),
          ['clone', '-q', '--filter=tree:0', '--no-checkout', 'URL', c(dir, 't0')],
          missing(c(dir, 't0')),
          ['-C', c(dir, 't0'), 'sparse-checkout', 'set', '--no-cone', '/f'],
          ['-C', c(dir, 't0'), 'checkout', '-q', 'main'],
          ['-C', c(dir, 't0'), 'ls-files', '-t'],
          ...state(c(dir, 't0')),
          ['-C', c(dir, 't0'), 'fetch', '-q'],
          missing(c(dir, 't0')),
        ],
        history,
      );
      assert.equal(knotless, bare);
      assert.match(knotless, /remote\.origin\.promisor -> 0\ntrue\n/);
      // The first listing of missing objects is not empty: the clone was partial.
      assert.match(knotless, /--missing=print --quiet -> 0\n\?[0-9a-f]{40}\n/);
    });
  });
}
