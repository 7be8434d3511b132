// What knotless reads of git's files by hand instead of starting a git process for it (pack indexes, a
// repository's object directory) agrees with git itself, and refuses what git did not write.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { readPackIndex } from 'knotless-core/git/pack-index';

/** Runs git in `dir` (a repository's git directory), failing the test on a non-zero exit. */
function git(dir: string, args: string[], input?: Buffer | string): Buffer {
  const r = spawnSync('git', args, { input, env: { ...process.env, GIT_DIR: dir }, maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `git ${args.join(' ')}: ${r.stderr.toString()}`);
  return r.stdout;
}

/** What `git show-index` says of an index: offset and name per object, in its order. */
function showIndex(dir: string, idx: Buffer): { oid: string; offset: number }[] {
  return git(dir, ['show-index'], idx)
    .toString()
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [offset, oid] = l.split(' ');
      return { oid: oid!, offset: Number(offset) };
    });
}

/** A repository with `n` blobs and a pack of them; returns its directory and the pack's bytes. */
function packOf(n: number): { dir: string; pack: Buffer } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-idx-'));
  git(dir, ['init', '-q', '--bare', '--object-format=sha1']);
  const oids = Array.from({ length: n }, (_, i) =>
    git(dir, ['hash-object', '-w', '--stdin'], `blob ${i}\n${'x'.repeat(i % 50)}`)
      .toString()
      .trim(),
  );
  return { dir, pack: git(dir, ['pack-objects', '--stdout', '-q'], oids.join('\n') + '\n') };
}

/** Indexes `pack` with git at the given index version and returns the index file's bytes. */
function indexOf(dir: string, pack: Buffer, version: 1 | 2): Buffer {
  const file = path.join(dir, `p${version}.pack`);
  fs.writeFileSync(file, pack);
  git(dir, ['index-pack', `--index-version=${version}`, '-o', path.join(dir, `p${version}.idx`), file]);
  return fs.readFileSync(path.join(dir, `p${version}.idx`));
}

/** Sets an index's trailing checksum to match its (edited) contents. */
function resum(idx: Buffer): Buffer {
  const body = idx.subarray(0, idx.length - 20);
  return Buffer.concat([body, crypto.createHash('sha1').update(body).digest()]);
}

describe('pack index reader', () => {
  it('reads what git show-index reads, for indexes of version 1 and 2', () => {
    for (const n of [1, 3, 300]) {
      const { dir, pack } = packOf(n);
      for (const version of [1, 2] as const) {
        const idx = indexOf(dir, pack, version);
        const ours = readPackIndex(idx);
        assert.equal(ours.length, n);
        assert.deepEqual(ours, showIndex(dir, idx), `n=${n} v${version}`);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reads 8-byte offsets (packs past 2 GiB) as git does', () => {
    const { dir, pack } = packOf(3);
    const idx = indexOf(dir, pack, 2);
    const count = 3;
    const offsets = 8 + 1024 + count * 24;
    // Point the second object at a large-offset table entry appended after the small offsets.
    const big = Buffer.alloc(8);
    big.writeBigUInt64BE(5n * 2n ** 32n + 12n);
    const edited = Buffer.concat([
      idx.subarray(0, offsets + count * 4),
      big,
      idx.subarray(offsets + count * 4),
    ]);
    edited.writeUInt32BE(0x80000000, offsets + 4);
    const fixed = resum(edited);
    const ours = readPackIndex(fixed);
    assert.equal(ours[1]!.offset, 5 * 2 ** 32 + 12);
    assert.deepEqual(ours, showIndex(dir, fixed));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('refuses malformed indexes instead of reading names out of them', () => {
    const { dir, pack } = packOf(5);
    const idx = indexOf(dir, pack, 2);
    const refused = (bytes: Buffer, why: RegExp) => assert.throws(() => readPackIndex(bytes), why);
    refused(idx.subarray(0, 100), /too short/);
    refused(resum(idx.subarray(0, idx.length - 4)), /size is wrong/);
    const flipped = Buffer.from(idx);
    flipped[1100]! ^= 1;
    refused(flipped, /checksum/);
    const version = Buffer.from(idx);
    version.writeUInt32BE(3, 4);
    refused(resum(version), /version 3/);
    const fanout = Buffer.from(idx);
    fanout.writeUInt32BE(0xffff, 8 + 4 * 10);
    refused(resum(fanout), /fanout/);
    const pastTable = Buffer.from(idx);
    pastTable.writeUInt32BE(0x80000000, 8 + 1024 + 5 * 24);
    refused(resum(pastTable), /past its table/);
    // An index of SHA-256 names ends in a SHA-256 checksum: refused, not misread as SHA-1.
    const sha = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-idx256-'));
    git(sha, ['init', '-q', '--bare', '--object-format=sha256']);
    const blob = git(sha, ['hash-object', '-w', '--stdin'], 'x').toString().trim();
    const pack256 = git(sha, ['pack-objects', '--stdout', '-q'], `${blob}\n`);
    fs.writeFileSync(path.join(sha, 'p.pack'), pack256);
    git(sha, ['index-pack', '-o', path.join(sha, 'p.idx'), path.join(sha, 'p.pack')]);
    refused(fs.readFileSync(path.join(sha, 'p.idx')), /checksum/);
    fs.rmSync(sha, { recursive: true, force: true });
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe("a push's object directory", () => {
  it('is the one git names, for a repository, a linked worktree, GIT_OBJECT_DIRECTORY and GIT_COMMON_DIR', async () => {
    const { forCaller } = await import('knotless-core/caller/scope');
    const { pushedFrom } = await import('knotless-core/git/objects');
    const top = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-objdir-')));
    const repo = path.join(top, 'repo');
    const run = (cwd: string, args: string[], env: NodeJS.ProcessEnv = {}) => {
      const r = spawnSync('git', args, { cwd, env: { ...process.env, ...env } });
      assert.equal(r.status, 0, `git ${args.join(' ')}: ${r.stderr.toString()}`);
      return r.stdout.toString().trim();
    };
    fs.mkdirSync(repo);
    run(repo, ['init', '-q']);
    run(repo, ['-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-q', '--allow-empty', '-m', 'a']);
    run(repo, ['worktree', 'add', '-q', '-b', 'side', path.join(top, 'wt')]);
    fs.mkdirSync(path.join(top, 'wt', 'sub'));
    fs.mkdirSync(path.join(top, 'elsewhere'));
    const cases: { cwd: string; env: Record<string, string> }[] = [
      { cwd: repo, env: { GIT_DIR: '.git' } },
      {
        cwd: path.join(top, 'wt', 'sub'),
        env: { GIT_DIR: run(path.join(top, 'wt'), ['rev-parse', '--git-dir']) },
      },
      { cwd: repo, env: { GIT_DIR: '.git', GIT_OBJECT_DIRECTORY: '../elsewhere' } },
      {
        cwd: path.join(top, 'wt'),
        env: { GIT_DIR: path.join(repo, '.git', 'worktrees', 'wt'), GIT_COMMON_DIR: path.join(repo, '.git') },
      },
    ];
    for (const c of cases) {
      const git = path.resolve(c.cwd, run(c.cwd, ['rev-parse', '--git-path', 'objects'], c.env));
      const env = { ...process.env, ...c.env };
      const ours = await forCaller({ env, cwd: c.cwd, stderr: () => {} }, async () =>
        (await pushedFrom()).objectsDir(),
      );
      assert.equal(ours, git, JSON.stringify(c));
    }
    fs.rmSync(top, { recursive: true, force: true });
  });
});
