import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { layoutOf } from './helpers/ref-packs.ts';

const t = useNetwork(['alice.test', 'bob.test']);
// Its repositories are on ref records (KNOTLESS_REF_TABLE=0), whose requests its cases count, and
// its commits run again on a ref table, the default layout (`layout`).
let layout: 'records' | 'table' = 'records';
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: layout === 'table' ? '1' : '0',
  KNOTLESS_TRACE: '1',
  KNOTLESS_COMPACT: '0',
}));
const bob = useGitUser(t, 'bob.test');

const requests = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith('knotless: trace')).length;

function file(content: string | Buffer, mode = 0o644): string {
  const p = path.join(alice.dir(), 'f');
  fs.writeFileSync(p, content, { mode });
  return p;
}

async function cloneOf(repo: string): Promise<string> {
  const out = alice.dir();
  await alice.ok(out, 'clone', '-q', `knotless://alice.test/${repo}`, 'c');
  return `${out}/c`;
}

/** Creates alice's repository `name` on the layout its case runs on. */
async function create(name: string): Promise<void> {
  const res = await alice.knotless('repo', 'create', name);
  assert.equal(res.code, 0, res.stderr);
  assert.equal(await layoutOf(t, 'alice.test', name), layout);
}

/**
 * What a commit on top costs on each layout (format.md, "The ref table"): on ref records, two requests
 * (the write, on the cached view of the records, and the verified read of the owner's table proving
 * none was created meanwhile, traced since verified reads go through the command's client); on a
 * table, which no cached view holds, three.
 */
const ON_TOP = { records: 2, table: 3 };

for (const on of ['records', 'table'] as const)
  describe(`knotless repo commit (on ${on === 'table' ? 'a ref table' : 'ref records'})`, () => {
    before(() => {
      layout = on;
    });
    // Each layout's repositories: ref records keep the names the refusals below use.
    const bot = on === 'table' ? 'bot-table' : 'bot';
    const adopt = on === 'table' ? 'adopt-table' : 'adopt';

    it('creates the first branch of an empty repository, then commits on top', async () => {
      await create(bot);
      const first = await alice.knotless(
        'repo',
        'commit',
        bot,
        '-m',
        'first',
        '--add',
        'README.md=' + file('# bot\n'),
      );
      assert.equal(first.code, 0, first.stderr);
      const c1 = first.stdout.trim();
      assert.match(c1, /^[0-9a-f]{40}$/);
      const second = await alice.knotless(
        'repo',
        'commit',
        bot,
        '-m',
        'second',
        '--add',
        'bin/run.sh=' + file('#!/bin/sh\necho hi\n', 0o755),
        '--add',
        'data/blob.bin=' + file(Buffer.from([0, 1, 2, 3])),
        '--delete',
        'README.md',
      );
      assert.equal(second.code, 0, second.stderr);
      assert.equal(requests(second.stderr), ON_TOP[on], second.stderr);
      const c2 = second.stdout.trim();

      const dir = await cloneOf(bot);
      assert.equal((await alice.ok(dir, 'rev-parse', 'HEAD')).trim(), c2);
      assert.equal((await alice.ok(dir, 'rev-parse', 'HEAD~1')).trim(), c1);
      assert.equal((await alice.ok(dir, 'symbolic-ref', 'HEAD')).trim(), 'refs/heads/main');
      assert.equal(fs.existsSync(path.join(dir, 'README.md')), false);
      assert.equal(fs.statSync(path.join(dir, 'bin/run.sh')).mode & 0o111, 0o111);
      assert.deepEqual([...fs.readFileSync(path.join(dir, 'data/blob.bin'))], [0, 1, 2, 3]);
      assert.equal(
        (await alice.ok(dir, 'log', '-1', '--format=%an <%ae>|%s')).trim(),
        'alice.test <alice.test@example.com>|second',
      );
      assert.equal((await alice.git(dir, 'fsck', '--full')).code, 0);
    });

    it('branches from HEAD, takes --author, and applies again on top when the branch moved', async () => {
      const feature = await alice.knotless(
        'repo',
        'commit',
        bot,
        '-b',
        'feature',
        '-m',
        'feat',
        '--author',
        'Bot <bot@example.com>',
        '--add',
        'f.txt=' + file('f\n'),
      );
      assert.equal(feature.code, 0, feature.stderr);
      // Someone pushes to main with git; our cached view still has the old main.
      const dir = await cloneOf(bot);
      const theirs = await commitFiles(alice, dir, { 'theirs.txt': 'theirs\n' }, 'theirs');
      await alice.ok(dir, 'push', '-q', 'origin', 'main');
      const mine = await alice.knotless(
        'repo',
        'commit',
        bot,
        '-m',
        'mine',
        '--add',
        'mine.txt=' + file('mine\n'),
      );
      assert.equal(mine.code, 0, mine.stderr);
      await alice.ok(dir, 'pull', '-q');
      assert.equal((await alice.ok(dir, 'rev-parse', 'HEAD')).trim(), mine.stdout.trim());
      assert.equal(
        (await alice.ok(dir, 'rev-parse', 'HEAD~1')).trim(),
        theirs,
        'the concurrent push was lost',
      );
      assert.ok(fs.existsSync(path.join(dir, 'theirs.txt')) && fs.existsSync(path.join(dir, 'mine.txt')));
      await alice.ok(dir, 'fetch', '-q', 'origin', 'feature');
      assert.equal(
        (await alice.ok(dir, 'log', '-1', '--format=%an <%ae>|%cn', 'FETCH_HEAD')).trim(),
        'Bot <bot@example.com>|alice.test',
      );
      assert.equal((await alice.ok(dir, 'rev-parse', 'FETCH_HEAD~1')).trim().length, 40);
    });

    it('compacts what its own commits made, without indexing them again (the mirror adopts its packs)', async () => {
      await create(adopt);
      for (let i = 0; i < 6; i++) {
        const res = await alice.knotless(
          'repo',
          'commit',
          adopt,
          '-m',
          `c${i}`,
          '--add',
          `d/f${i}=${file(`${i}\n`.repeat(i + 1))}`,
        );
        assert.equal(res.code, 0, res.stderr);
      }
      const compacted = await alice.knotless('repo', 'compact', adopt);
      assert.equal(compacted.code, 0, compacted.stderr);
      // Six commits, each a structure pack and a blob pack.
      assert.match(compacted.stderr, /refs\/heads\/main: 12 packs → \d+/);
      const c = await cloneOf(adopt);
      assert.equal((await alice.ok(c, 'rev-list', '--count', 'HEAD')).trim(), '6');
      assert.equal((await alice.ok(c, 'fsck', '--full')).trim(), '');
      assert.equal((await alice.ok(c, 'ls-files')).trim().split('\n').length, 6);
    });
  });

describe('knotless repo commit: what it refuses', () => {
  before(() => {
    layout = 'records';
  });

  it('explains what is wrong with its arguments, and refuses other accounts', async () => {
    const noMessage = await alice.knotless('repo', 'commit', 'bot', '--add', 'a=' + file('x'));
    assert.equal(noMessage.code, 2);
    assert.match(noMessage.stderr, /needs a message/);
    const badAdd = await alice.knotless('repo', 'commit', 'bot', '-m', 'x', '--add', 'nofile');
    assert.equal(badAdd.code, 2);
    assert.match(badAdd.stderr, /--add PATH=FILE/);
    const noFile = await alice.knotless('repo', 'commit', 'bot', '-m', 'x', '--add', 'a=/nonexistent/file');
    assert.equal(noFile.code, 2);
    assert.match(noFile.stderr, /\/nonexistent\/file is not a file here/);
    const nothing = await alice.knotless('repo', 'commit', 'bot', '-m', 'x');
    assert.equal(nothing.code, 2);
    const other = await bob.knotless(
      'repo',
      'commit',
      'alice.test/bot',
      '-m',
      'x',
      '--add',
      'a=' + file('x'),
    );
    assert.equal(other.code, 5);
    const missing = await alice.knotless('repo', 'commit', 'nope', '-m', 'x', '--add', 'a=' + file('x'));
    assert.equal(missing.code, 7);
  });

  it('refuses a path git would not check out: one sentence, exit 2, nothing written', async () => {
    const refs = () => alice.ok(alice.dir(), 'ls-remote', 'knotless://alice.test/bot');
    const before = await refs();
    const cases: [string, string][] = [
      ['git~1/x', 'its part "git~1" is the .git folder on Windows (NTFS)'],
      ['.git /x', 'its part ".git " is the .git folder on Windows (NTFS)'],
      ['.gI\u200ct/x', 'its part ".gI\u200ct" is the .git folder on macOS (HFS+)'],
    ];
    for (const [bad, why] of cases) {
      const r = await alice.knotless('repo', 'commit', 'bot', '-m', 'x', '--add', `${bad}=${file('x')}`);
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stdout, '');
      const lines = r.stderr.split('\n').filter((l) => l !== '' && !l.startsWith('knotless: trace'));
      assert.deepEqual(lines, [
        `knotless: "${bad}" is not a path git will check out: ${why}; choose another.`,
      ]);
      assert.equal(requests(r.stderr), 0, r.stderr);
    }
    // The escape character is named, not sent to the terminal.
    const esc = await alice.knotless('repo', 'commit', 'bot', '-m', 'x', '--add', `e\x1b[2Jx=${file('x')}`);
    assert.equal(esc.code, 2);
    assert.match(
      esc.stderr,
      /^knotless: "e\\x1b\[2Jx" is not a path git will check out: it holds a control/m,
    );
    assert.ok(!esc.stderr.includes('\x1b'), 'no escape character reaches the terminal');
    assert.equal(await refs(), before, 'no ref moved');
  });

  it('removes a path git itself stores but knotless would not write (a tab in its name): the repair', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'odd')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/odd');
    await commitFiles(alice, work, { 'tab\there.txt': 'x\n', 'keep.txt': 'k\n' }, 'a tab in a name');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const add = await alice.knotless(
      'repo',
      'commit',
      'odd',
      '-m',
      'x',
      '--add',
      `tab\tthere.txt=${file('y')}`,
    );
    assert.equal(add.code, 2, add.stderr);
    const removed = await alice.knotless(
      'repo',
      'commit',
      'odd',
      '-m',
      'remove it',
      '--delete',
      'tab\there.txt',
    );
    assert.equal(removed.code, 0, removed.stderr);
    const dir = await cloneOf('odd');
    assert.equal((await alice.ok(dir, 'ls-files')).trim(), 'keep.txt');
    const bad = await alice.knotless('repo', 'commit', 'odd', '-m', 'x', '--delete', 'a//b');
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(
      bad.stderr,
      /^knotless: "a\/\/b" names no path a repository can hold: it has an empty part \("\/\/"\)\.$/m,
    );
  });
});
