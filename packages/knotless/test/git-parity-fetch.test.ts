import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { commitFiles } from './helpers/git.ts';
import { OTHER, useParity } from './helpers/parity.ts';

// git fetches and clones from knotless and from a bare repository (helpers/parity.ts): the same
// outcome. Pushes: git-parity.test.ts.
const { plain, both } = useParity();

describe('git fetch and clone from knotless and from a bare repository: the same outcome', () => {
  it('another machine deletes a branch and a tag: fetch --prune prunes both, as from a bare repository', async () => {
    const { bare, knotless } = await both(
      plain,
      (dir) => [
        ['push', '--porcelain', 'origin', 'main', 'main:side', 'v1', 'main:refs/tags/lt'],
        ['-C', path.join(dir, 'c'), 'fetch', '-q', 'origin'],
        [OTHER, 'push', '--porcelain', 'URL', ':side', ':refs/tags/lt'],
        ['-C', path.join(dir, 'c'), 'fetch', '--prune', '--prune-tags', 'origin'],
        ['-C', path.join(dir, 'c'), 'for-each-ref', '--format=%(objectname) %(refname)'],
        ['-C', path.join(dir, 'c'), 'fetch', 'origin', 'tag', 'lt'],
      ],
      async (u, dir) => {
        await u.ok(dir, 'tag', '-a', 'v1', '-m', 'v1');
        await u.ok(dir, 'init', '-q', 'c');
        await u.ok(
          path.join(dir, 'c'),
          'remote',
          'add',
          'origin',
          (await u.ok(dir, 'remote', 'get-url', 'origin')).trim(),
        );
      },
    );
    assert.equal(knotless, bare);
  });

  it('clones an empty repository, then --bare, --mirror, --single-branch, --no-tags clones, ls-remote --symref, remote show and pull --rebase', async () => {
    const c = (dir: string, name: string) => path.join(dir, name);
    const refsIn = (dir: string): string[] => [
      '-C',
      dir,
      'for-each-ref',
      '--format=%(objectname) %(refname) %(symref)',
    ];
    const { bare, knotless } = await both(
      plain,
      (dir) => [
        ['clone', '-q', 'URL', c(dir, 'empty')],
        refsIn(c(dir, 'empty')),
        ['push', '--porcelain', 'origin', 'main', 'main:side', 'v1'],
        ['clone', '-q', '--bare', 'URL', c(dir, 'b.git')],
        refsIn(c(dir, 'b.git')),
        ['clone', '-q', '--mirror', 'URL', c(dir, 'm.git')],
        refsIn(c(dir, 'm.git')),
        ['-C', c(dir, 'm.git'), 'config', '--get-all', 'remote.origin.fetch'],
        ['clone', '-q', '--single-branch', '--branch', 'side', 'URL', c(dir, 'sb')],
        refsIn(c(dir, 'sb')),
        ['clone', '-q', '--no-tags', 'URL', c(dir, 'nt')],
        refsIn(c(dir, 'nt')),
        ['ls-remote', '--symref', 'URL'],
        ['-C', c(dir, 'nt'), 'remote', 'show', 'origin'],
        // Another machine pushes main; a local commit is rebased onto it.
        [OTHER, '-C', c(dir, 'o'), 'push', '--porcelain', 'URL', 'HEAD:main'],
        ['-C', c(dir, 'nt'), 'commit', '-q', '--allow-empty', '-m', 'local'],
        ['-C', c(dir, 'nt'), 'pull', '-q', '--rebase'],
        ['-C', c(dir, 'nt'), 'log', '--format=%s'],
        ['-C', c(dir, 'nt'), 'rev-list', '--objects', '--all'],
      ],
      async (u, dir) => {
        await u.ok(dir, 'tag', '-a', 'v1', '-m', 'v1');
        await u.ok(dir, 'clone', '-q', dir, 'o');
        await commitFiles(u, path.join(dir, 'o'), { b: 'theirs' }, 'theirs');
      },
    );
    assert.equal(knotless, bare);
    assert.match(knotless, /warning: You appear to have cloned an empty repository/);
  });

  it('fetches an object by its id, a tip or older, and refuses one no ref reaches, as upload-pack does', async () => {
    let first = '';
    const { bare, knotless } = await both(
      plain,
      (dir) => [
        ['push', '--porcelain', 'origin', 'main'],
        ['init', '-q', path.join(dir, 'b')],
        ['-C', path.join(dir, 'b'), 'fetch', '-q', 'URL', first],
        ['-C', path.join(dir, 'b'), 'rev-parse', 'FETCH_HEAD'],
        ['-C', path.join(dir, 'b'), 'fetch', '-q', 'URL', '1111111111111111111111111111111111111111'],
        ['-C', path.join(dir, 'b'), 'cat-file', '-t', first],
      ],
      async (u, dir) => {
        first = (await u.ok(dir, 'rev-parse', 'HEAD')).trim();
        await commitFiles(u, dir, { a: '2' }, 'two');
      },
    );
    assert.equal(knotless, bare);
    assert.match(knotless, /fetch -q URL 1{40} -> 128/);
  });
});
