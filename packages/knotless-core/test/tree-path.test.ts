// The rule for paths a commit may hold, against a table of names, each also put to real git: its
// index (`update-index --cacheinfo`, git's verify_path) and a checkout of a commit holding it
// (`read-tree`, what a clone's checkout runs), with the NTFS and HFS+ protections on. The table is
// git's answer, not our opinion; where ours is stricter the row says why and the test checks that git
// really does take the name.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeCommitStream } from '../src/git/fast-import.ts';
import {
  checkRemovedPath,
  checkTreePath,
  treePathRefusal,
  type TreeEntryKind,
} from '../src/git/tree-path.ts';

interface Row {
  path: string;
  kind?: TreeEntryKind;
  refused: boolean;
  /** Why ours refuses what git on this machine takes; `unnameable`: git cannot be handed it. */
  stricter?: string;
}

const refused = (p: string, kind: TreeEntryKind = 'file'): Row => ({ path: p, kind, refused: true });
const taken = (p: string, kind: TreeEntryKind = 'file'): Row => ({ path: p, kind, refused: false });
const stricter = (p: string, why: string): Row => ({ path: p, refused: true, stricter: why });

const TABLE: Row[] = [
  // Plain names, and names that only look like git's.
  ...['a', 'a/b/c', 'sp ace/é.md', 'ünï/ℂ/🙂', '...', 'a.git', '.gitx', '.git.txt', '.git~1', 'git'].map(
    (p) => taken(p),
  ),
  ...['git~2', 'git~1x', 'x:y', '.gİt', '.gitignore', '.gitmodules', 'gitmod~1', 'gi7eba~1'].map((p) =>
    taken(p),
  ),
  // The form of a path.
  ...['', '/abs', 'a//b', 'a/', './a', 'a/./b', 'a/../b', '..', '.'].map((p) => refused(p)),
  // .git in any case, anywhere.
  ...['.git', '.GIT', '.Git/config', 'x/.git', 'x/.gIT/y'].map((p) => refused(p)),
  // NTFS: the short name, trailing spaces and periods, alternate data streams, `\` as a separator.
  ...['git~1/x', 'GIT~1', 'git~1.', '.git /x', '.git ', '.git.', '.git. . .', '.git::$INDEX_ALLOCATION'].map(
    (p) => refused(p),
  ),
  ...['.git:stream', 'a\\.git', '.git\\x'].map((p) => refused(p)),
  // HFS+: code points it ignores, before, inside or after.
  ...['.g\u200cit', '.gI\u200ct/x', '\ufeff.git', '.git\u200d', '.gi\u206at', 'x/.g\u200dit'].map((p) =>
    refused(p),
  ),
  // .gitmodules as a symbolic link, and its aliases.
  ...['.gitmodules', '.GITMODULES', 'sub/.gitmodules', '.gitmodules.', '.gitmodules ', '.gitmodules:x'].map(
    (p) => refused(p, 'symlink'),
  ),
  ...[
    'gitmod~1',
    'GITMOD~4',
    'gi7eba~1',
    'GI7EBA~9',
    'gi7eb~12',
    'g~123456',
    '~1234567',
    '.gitmodules/x',
  ].map((p) => refused(p, 'symlink')),
  ...['.g\u200citmodules', '.gitmodules\ufeff'].map((p) => refused(p, 'symlink')),
  ...['gitmod~5', 'gi7eba~0', 'gi7ebb~1', 'gitmod~1/x', 'gi7eba~10', 'x.gitmodules', '.gitmodulesx'].map(
    (p) => taken(p, 'symlink'),
  ),
  // Ours, stricter than git.
  ...['e\x1b[31mx', 'tab\there', 'line\nbreak', 'bell\x07', 'del\x7f', 'c1\u0085', 'ls\u2028x'].map((p) =>
    stricter(p, 'a control character makes a name print as another in a terminal'),
  ),
  stricter('rlo\u202eevil.txt', 'a bidi override makes a name read as another'),
  stricter('lone\ud800', 'not valid Unicode: the name would be stored as U+FFFD'),
  stricter('a\\b', 'git on Windows refuses it: there `\\` is a separator'),
  stricter('nul\0x', 'unnameable'),
];

let repo: string;
let blob: string;
const protect = ['-c', 'core.protectNTFS=true', '-c', 'core.protectHFS=true'];

/** Whether git's index takes the path as a `kind` entry. */
function gitIndexRefuses(p: string, kind: TreeEntryKind): boolean {
  const mode = kind === 'file' ? '100644' : '120000';
  const r = spawnSync('git', [...protect, 'update-index', '--add', '--cacheinfo', `${mode},${blob},${p}`], {
    cwd: repo,
    env: { ...process.env, GIT_INDEX_FILE: path.join(repo, 'scratch-index') },
  });
  fs.rmSync(path.join(repo, 'scratch-index'), { force: true });
  return r.status !== 0;
}

/** Whether git checks out a commit holding the file, made as `repo commit` makes one. */
function gitCheckoutRefuses(p: string, n: number): boolean {
  const stream = writeCommitStream({
    ref: `refs/heads/row-${n}`,
    parent: undefined,
    author: 'A <a@example> 0 +0000',
    committer: 'A <a@example> 0 +0000',
    message: 'row',
    changes: [{ kind: 'add', path: p, executable: false, content: Buffer.from('x\n') }],
  });
  const commit = execFileSync('git', ['fast-import', '--done', '--quiet'], { cwd: repo, input: stream })
    .toString()
    .trim();
  const r = spawnSync('git', [...protect, 'read-tree', commit], {
    cwd: repo,
    env: { ...process.env, GIT_INDEX_FILE: path.join(repo, 'scratch-index') },
  });
  fs.rmSync(path.join(repo, 'scratch-index'), { force: true });
  return r.status !== 0;
}

describe("the paths a commit may hold: git's rule", () => {
  before(() => {
    repo = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-paths-'));
    execFileSync('git', ['init', '-q', repo]);
    blob = execFileSync('git', ['hash-object', '-w', '--stdin'], { cwd: repo, input: 'x\n' })
      .toString()
      .trim();
  });
  after(() => fs.rmSync(repo, { recursive: true, force: true }));

  it('refuses what git refuses and takes what it takes, name by name', () => {
    const wrong: string[] = [];
    TABLE.forEach((row, n) => {
      const kind = row.kind ?? 'file';
      const label = `${JSON.stringify(row.path)} as a ${kind}`;
      const ours = treePathRefusal(row.path, kind) !== undefined;
      if (ours !== row.refused) wrong.push(`${label}: ours ${ours ? 'refuses' : 'takes'} it`);
      if (row.stricter === 'unnameable') return;
      // git's own answer; for a row where ours is stricter, git must really take the name.
      const expected = row.stricter === undefined ? row.refused : false;
      if (gitIndexRefuses(row.path, kind) !== expected)
        wrong.push(`${label}: git's index ${expected ? 'takes' : 'refuses'} it`);
      // The paths no fast-import stream can carry are left to the index's answer.
      const streamable =
        kind === 'file' && row.path !== '' && !row.path.endsWith('/') && !row.path.startsWith('/');
      if (
        streamable &&
        !/(^|\/)\.{1,2}(\/|$)|\/\//.test(row.path) &&
        gitCheckoutRefuses(row.path, n) !== expected
      )
        wrong.push(`${label}: git's checkout ${expected ? 'takes' : 'refuses'} it`);
    });
    assert.deepEqual(wrong, []);
  });

  it('says in one sentence which path and why, with what a terminal would act on escaped', () => {
    assert.throws(() => checkTreePath('git~1/x'), {
      code: 'usage',
      message:
        '"git~1/x" is not a path git will check out: its part "git~1" is the .git folder on Windows (NTFS); choose another.',
    });
    assert.throws(() => checkTreePath('.gI\u200ct/x'), {
      message:
        '".gI\u200ct/x" is not a path git will check out: its part ".gI\u200ct" is the .git folder on macOS (HFS+); choose another.',
    });
    assert.throws(() => checkTreePath('e\x1b[31mx'), {
      message:
        '"e\\x1b[31mx" is not a path git will check out: it holds a control, bidi or line-separator character; choose another.',
    });
    assert.throws(() => checkTreePath('.gitmodules', 'symlink'), /symbolic link may not be \.gitmodules/);
    checkTreePath('.gitmodules');
  });

  it('a path to remove need only be a path, so one git refuses can be removed', () => {
    for (const p of ['git~1/x', '.git /x', 'tab\there', 'a\\b', '.g\u200cit', 'e\x1bx']) checkRemovedPath(p);
    for (const p of ['', '/abs', 'a/', 'a//b', './a', 'a/../b', '..', 'nul\0x', 'lone\ud800'])
      assert.throws(() => checkRemovedPath(p), { code: 'usage' }, JSON.stringify(p));
  });
});
