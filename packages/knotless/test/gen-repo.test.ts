import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runProcess } from './helpers/cli.ts';
import { generateRepo, gitEnv, SMALL } from './helpers/gen-repo.ts';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-gen-repo-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));

async function git(dir: string, ...args: string[]): Promise<string> {
  const r = await runProcess('git', args, { env: gitEnv(), cwd: dir });
  assert.equal(r.code, 0, `git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

const forEachRef = (dir: string): Promise<string> =>
  git(dir, 'for-each-ref', '--format=%(objectname) %(objecttype) %(refname)');

describe('generateRepo', () => {
  const bare = path.join(root, 'bare.git');
  const work = path.join(root, 'work');

  before(async () => {
    await generateRepo(bare, { ...SMALL, bare: true });
    await generateRepo(work, { ...SMALL, bare: false });
  });

  it('passes git fsck --full', async () => {
    for (const dir of [bare, work]) {
      const r = await runProcess('git', ['fsck', '--full', '--strict'], { env: gitEnv(), cwd: dir });
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stdout + r.stderr, /error|missing|warning|dangling/i);
    }
  });

  it('has every branch and tag, with main as HEAD', async () => {
    const refs = (await git(bare, 'for-each-ref', '--format=%(refname)')).trim().split('\n');
    assert.equal(refs.length, SMALL.branches! + SMALL.lightweightTags! + SMALL.annotatedTags!);
    assert.equal(refs.filter((r) => r.startsWith('refs/heads/')).length, SMALL.branches);
    for (const name of ['main', 'user/ünï/x', 'weird#name', 'release@1.0', 'a+b']) {
      assert.ok(refs.includes(`refs/heads/${name}`), name);
    }
    assert.equal((await git(bare, 'symbolic-ref', 'HEAD')).trim(), 'refs/heads/main');
  });

  it('has merge commits and annotated tags', async () => {
    assert.equal(Number(await git(bare, 'rev-list', '--merges', '--all', '--count')), SMALL.merges);
    assert.equal(Number(await git(bare, 'rev-list', '--all', '--count')), SMALL.commits);
    const types = (await git(bare, 'for-each-ref', '--format=%(objecttype)', 'refs/tags')).split('\n');
    assert.equal(types.filter((t) => t === 'tag').length, SMALL.annotatedTags);
    assert.equal(types.filter((t) => t === 'commit').length, SMALL.lightweightTags);
  });

  it('has the special files on main', async () => {
    const entries = (await git(bare, 'ls-tree', '-r', '-z', '--long', 'main')).split('\0');
    const modeOf = (name: string): string | undefined =>
      entries.find((e) => e.endsWith(`\t${name}`))?.split(' ')[0];
    assert.equal(modeOf('link-to-readme'), '120000');
    assert.equal(modeOf('scripts/build.sh'), '100755');
    assert.equal(modeOf('docs/ünïcödé-名前.md'), '100644');
    assert.equal(modeOf('docs/file with spaces.txt'), '100644');
    const binary = entries.find((e) => e.endsWith('\tassets/bin-0.dat'));
    assert.ok(binary, 'a binary file');
    const size = Number(binary.split('\t')[0]!.trim().split(/ +/)[3]);
    assert.ok(size >= 1024 && size <= 200 * 1024, `size ${size}`);
    const blob = await runProcess('git', ['cat-file', 'blob', 'main:assets/bin-0.dat'], {
      env: gitEnv(),
      cwd: bare,
    });
    assert.ok(blob.stdout.includes('\0'), 'the binary file holds a NUL');
  });

  it('checks main out in a non-bare repository', async () => {
    assert.equal(await git(work, 'status', '--porcelain'), '');
    assert.equal(fs.readlinkSync(path.join(work, 'link-to-readme')), 'README.md');
    assert.ok(fs.statSync(path.join(work, 'scripts', 'build.sh')).mode & 0o100);
  });

  it('is deterministic for a seed, and differs between seeds', async () => {
    // The bare and non-bare repositories came from the same seed.
    assert.equal(await forEachRef(work), await forEachRef(bare));
    const other = path.join(root, 'seed2.git');
    await generateRepo(other, { ...SMALL, bare: true, seed: 2 });
    assert.notEqual(await forEachRef(other), await forEachRef(bare));
  });
});
