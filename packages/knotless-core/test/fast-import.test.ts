import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { parseIdents, quotePath, writeCommitStream } from '../src/git/fast-import.ts';

describe('one commit through git fast-import', () => {
  it('stores odd paths byte for byte, executables, deletes, and prints the commit id', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-fi-'));
    try {
      execFileSync('git', ['init', '-q', '--bare', dir]);
      const names = ['plain.txt', 'sp ace/é.md', 'quote"back\\slash', 'tab\there', 'line\nbreak', 'ünï/ℂ/🙂'];
      const run = (stream: Buffer) =>
        execFileSync('git', ['fast-import', '--done', '--quiet'], {
          env: { ...process.env, GIT_DIR: dir },
          input: stream,
        })
          .toString()
          .trim();
      const who = 'A U Thor <a@example.com> 1700000000 +0100';
      const first = run(
        writeCommitStream({
          ref: 'refs/knotless/t1',
          parent: undefined,
          author: who,
          committer: who,
          message: 'first\n\nbody',
          changes: names.map((p, i) => ({
            kind: 'add',
            path: p,
            executable: i === 1,
            content: Buffer.from(`${i}\n`),
          })),
        }),
      );
      assert.match(first, /^[0-9a-f]{40}$/);
      const git = (...args: string[]) =>
        execFileSync('git', args, { env: { ...process.env, GIT_DIR: dir } }).toString();
      const tree = git('ls-tree', '-r', '-z', '--full-tree', first).split('\0').filter(Boolean);
      assert.deepEqual(tree.map((l) => l.slice(l.indexOf('\t') + 1)).sort(), [...names].sort());
      assert.ok(tree.some((l) => l.startsWith('100755') && l.endsWith('\tsp ace/é.md')));
      assert.equal(git('log', '-1', '--format=%B', first), 'first\n\nbody\n');
      const second = run(
        writeCommitStream({
          ref: 'refs/knotless/t2',
          parent: first,
          author: who,
          committer: who,
          message: 'second',
          changes: [{ kind: 'delete', path: 'line\nbreak' }],
        }),
      );
      assert.equal(git('rev-parse', `${second}^`).trim(), first);
      assert.equal(
        git('ls-tree', '-r', '--name-only', second).split('\n').filter(Boolean).length,
        names.length - 1,
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('quotes paths C-style', () => {
    assert.equal(quotePath('a"b\\c\n'), '"a\\"b\\\\c\\012"');
  });

  it('reads identities from git var -l, and says what to set when git has none', () => {
    const vars = 'user.name=x\nGIT_COMMITTER_IDENT=C <c@x> 1 +0000\nGIT_AUTHOR_IDENT=A <a@x> 2 +0000\n';
    assert.deepEqual(parseIdents(vars), { author: 'A <a@x> 2 +0000', committer: 'C <c@x> 1 +0000' });
    assert.throws(() => parseIdents(''), /user\.name and user\.email/);
  });
});
