// A fold merges the small inline packs at the end of a ref's pack list. A process that folds again
// (the warm agent) spares the packs whose objects it already knows an index-pack; where the
// repository it folds against lacks those objects, it indexes them after all, and the fold is the
// same. Real git throughout; a wrapper on PATH counts the git processes a fold starts.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { rangeObjects } from 'knotless-core/git/pack';
import { foldPacks } from 'knotless-core/packs/fold';
import { knownObjects, packKey, rememberObjects } from 'knotless-core/packs/pack-objects-memo';
import type { PackEntry } from 'knotless-core/records/ref-record';

const top = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-fold-test-')));
after(() => fs.rmSync(top, { recursive: true, force: true }));

function git(dir: string, args: string[], input?: string | Buffer): Buffer {
  const r = spawnSync('git', args, { input, env: { ...process.env, GIT_DIR: dir }, maxBuffer: 64 << 20 });
  assert.equal(r.status, 0, `git ${args.join(' ')}: ${r.stderr.toString()}`);
  return r.stdout;
}

/** A repository with commits c1..c5, each changing a file of a few KiB; returns their ids. */
function history(dir: string): string[] {
  git(dir, ['init', '-q', '--bare', '--object-format=sha1']);
  const commits: string[] = [];
  let text = Array.from({ length: 400 }, (_, i) => `line ${i}`).join('\n');
  for (let i = 1; i <= 5; i++) {
    text += `\nchange ${i}`;
    const blob = git(dir, ['hash-object', '-w', '--stdin'], text).toString().trim();
    const other = git(dir, ['hash-object', '-w', '--stdin'], `file ${i}\n`).toString().trim();
    const tree = git(dir, ['mktree'], `100644 blob ${blob}\ta.txt\n100644 blob ${other}\tn${i}.txt\n`)
      .toString()
      .trim();
    const parent = commits.length > 0 ? ['-p', commits.at(-1)!] : [];
    const env = { GIT_AUTHOR_DATE: `${1700000000 + i} +0000`, GIT_COMMITTER_DATE: `${1700000000 + i} +0000` };
    const r = spawnSync(
      'git',
      ['-c', 'user.name=a', '-c', 'user.email=a@b', 'commit-tree', tree, ...parent, '-m', `c${i}`],
      {
        env: { ...process.env, ...env, GIT_DIR: dir },
      },
    );
    commits.push(r.stdout.toString().trim());
  }
  return commits;
}

/** An inline pack entry of what `tip` reaches and `not` does not; thin against `not` when asked. */
function pack(dir: string, tip: string, not: string | undefined, thin: boolean): PackEntry {
  const input = `${tip}\n${not === undefined ? '' : `^${not}\n`}`;
  const bytes = git(dir, ['pack-objects', '--stdout', '--revs', '-q', ...(thin ? ['--thin'] : [])], input);
  return {
    id: bytes.subarray(bytes.length - 20).toString('hex'),
    size: bytes.length,
    count: bytes.readUInt32BE(8),
    inline: new Uint8Array(bytes),
  };
}

/** The objects of a (complete) pack, sorted, read back by git. */
function objectsOf(entry: PackEntry): string[] {
  const dir = fs.mkdtempSync(path.join(top, 'check-'));
  git(dir, ['init', '-q', '--bare']);
  fs.writeFileSync(path.join(dir, 'p.pack'), entry.inline!);
  git(dir, ['index-pack', path.join(dir, 'p.pack')]);
  const out = git(dir, ['show-index'], fs.readFileSync(path.join(dir, 'p.idx')));
  return out
    .toString()
    .trim()
    .split('\n')
    .map((l) => l.split(' ')[1]!)
    .sort();
}

/** A folder with a git wrapper that logs each command's name, and the commands logged so far. */
function gitCounter(): { bin: string; commands: () => string[] } {
  const bin = fs.mkdtempSync(path.join(top, 'bin-'));
  const log = path.join(bin, 'log');
  const real = spawnSync('sh', ['-c', 'command -v git']).stdout.toString().trim();
  fs.writeFileSync(path.join(bin, 'git'), `#!/bin/sh\necho "$1" >> '${log}'\nexec '${real}' "$@"\n`, {
    mode: 0o755,
  });
  const commands = () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n') : []);
  return { bin, commands };
}

/** Runs `work` with a git wrapper first on PATH; returns what it gave and the git commands it ran. */
async function counting<T>(work: () => Promise<T>): Promise<{ value: T; commands: string[] }> {
  const { bin, commands } = gitCounter();
  const before = process.env['PATH'];
  process.env['PATH'] = `${bin}:${before ?? ''}`;
  try {
    const value = await work();
    return { value, commands: commands() };
  } finally {
    process.env['PATH'] = before;
  }
}

/** What a fold in a new process is given, as JSON (pack bytes in base64). */
interface Order {
  list: Array<Omit<PackEntry, 'inline'> & { inline: string }>;
  repo: string;
  memoDir: string;
  /** The index of the new pack whose objects the push tells the fold, and those objects. */
  told?: { index: number; objects: string[] } | undefined;
  out: string;
}

const CHILD = `
import fs from 'node:fs';
import { foldPacks } from 'knotless-core/packs/fold';
import { rememberObjects } from 'knotless-core/packs/pack-objects-memo';
const order = JSON.parse(fs.readFileSync(process.argv[1], 'utf8'));
const list = order.list.map((p) => ({ ...p, inline: new Uint8Array(Buffer.from(p.inline, 'base64')) }));
if (order.told) rememberObjects(list[order.told.index].inline, order.told.objects, order.memoDir);
const repo = { gitDir: order.repo, objectsDir: order.repo + '/objects', memoDir: order.memoDir };
const out = await foldPacks(list, repo);
fs.writeFileSync(order.out, JSON.stringify(out.map((p) => ({ ...p, inline: Buffer.from(p.inline).toString('base64') }))));
`;

/**
 * Folds `list` against `repo` in a process of its own, as the next push's helper process does, with
 * the memo kept in `memoDir`; the new pack at `told` is told its objects, as a push tells them.
 */
function foldInNewProcess(
  list: PackEntry[],
  repo: string,
  memoDir: string,
  told?: { index: number; objects: string[] },
): { value: PackEntry[]; commands: string[] } {
  const { bin, commands } = gitCounter();
  const file = path.join(bin, 'order.json');
  const out = path.join(bin, 'out.json');
  const inline = (p: PackEntry) => ({ ...p, inline: Buffer.from(p.inline!).toString('base64') });
  const order: Order = { list: list.map(inline), repo, memoDir, told, out };
  fs.writeFileSync(file, JSON.stringify(order));
  const r = spawnSync(
    process.execPath,
    ['--conditions=development', '--input-type=module', '-e', CHILD, file],
    { cwd: import.meta.dirname, env: { ...process.env, PATH: `${bin}:${process.env['PATH'] ?? ''}` } },
  );
  assert.equal(r.status, 0, r.stderr.toString());
  const value = (JSON.parse(fs.readFileSync(out, 'utf8')) as Order['list']).map((p) => ({
    ...p,
    inline: new Uint8Array(Buffer.from(p.inline, 'base64')),
  }));
  return { value, commands: commands() };
}

describe('folding packs', () => {
  const full = path.join(top, 'full.git');
  const c = history(full);
  const p2 = pack(full, c[1]!, c[0], true);
  const p3 = pack(full, c[2]!, c[1], true);
  const base = pack(full, c[0]!, undefined, false);
  // A big first pack (kept), then small ones (merged): geometric planning folds from the second.
  const big: PackEntry = { ...base, size: 1 << 20 };

  it('merges the small packs into one holding exactly their objects, and a second fold spares the first', async () => {
    const first = await counting(() =>
      foldPacks([big, p2, p3], { gitDir: full, objectsDir: path.join(full, 'objects') }),
    );
    assert.equal(first.value.length, 2);
    const merged = first.value[1]!;
    assert.deepEqual(objectsOf(merged), [...new Set([...objectsOf(pack(full, c[2]!, c[0], false))])].sort());
    assert.deepEqual(first.commands.filter((x) => x === 'index-pack').length, 2);

    // The next push's fold: the merged pack (this process made it) and a new thin pack. Only the
    // new one is indexed. (Its size is made to count as large enough that the two are merged.)
    const p4 = { ...pack(full, c[3]!, c[2], true), size: merged.size };
    const second = await counting(() =>
      foldPacks([big, merged, p4], { gitDir: full, objectsDir: path.join(full, 'objects') }),
    );
    assert.equal(second.value.length, 2);
    assert.deepEqual(second.commands.sort(), ['index-pack', 'pack-objects']);
    assert.deepEqual(objectsOf(second.value[1]!), objectsOf(pack(full, c[3]!, c[0], false)));

    // A push tells the fold what its new pack holds (the range's objects): with every pack known,
    // the fold is one pack-objects in the repository itself, no scratch repository.
    const merged2 = second.value[1]!;
    const p5 = { ...pack(full, c[4]!, c[3], true), size: merged2.size };
    rememberObjects(p5.inline!, await rangeObjects([c[4]!], [c[3]!], full));
    const third = await counting(() =>
      foldPacks([big, merged2, p5], { gitDir: full, objectsDir: path.join(full, 'objects') }),
    );
    assert.equal(third.value.length, 2);
    assert.deepEqual(third.commands, ['pack-objects']);
    assert.deepEqual(objectsOf(third.value[1]!), objectsOf(pack(full, c[4]!, c[0], false)));
  });

  it("knows a range's objects as pack-objects packs them, replace refs and all", async () => {
    const repo = path.join(top, 'replaced.git');
    const r = history(repo);
    // c3 replaced by another commit with another tree: rev-list would follow it, pack-objects not.
    const other = git(repo, ['mktree'], '').toString().trim();
    const fake = spawnSync('git', ['commit-tree', other, '-p', r[1]!, '-m', 'fake'], {
      env: {
        ...process.env,
        GIT_DIR: repo,
        GIT_AUTHOR_NAME: 'a',
        GIT_AUTHOR_EMAIL: 'a@b',
        GIT_COMMITTER_NAME: 'a',
        GIT_COMMITTER_EMAIL: 'a@b',
      },
    })
      .stdout.toString()
      .trim();
    git(repo, ['replace', r[2]!, fake]);
    const packed = pack(repo, r[3]!, r[1], true);
    const listed = await rangeObjects([r[3]!], [r[1]!], repo);
    assert.equal(listed.length, packed.count);
    assert.deepEqual([...listed].sort(), objectsOf(pack(repo, r[3]!, r[1], false)));
  });

  it('indexes spared packs after all when the repository it folds against lacks their objects', async () => {
    const merged = (
      await foldPacks([big, p2, p3], { gitDir: full, objectsDir: path.join(full, 'objects') })
    )[1]!;
    // A repository with c1's objects and c4's alone: the merged pack's objects (c2, c3) are missing.
    const partial = path.join(top, 'partial.git');
    git(partial, ['init', '-q', '--bare']);
    git(partial, ['index-pack', '--stdin'], Buffer.from(base.inline!));
    // A pack thin on c3 (which only the merged pack holds), then one not thin: both must fold.
    for (const thin of [true, false]) {
      const p4 = { ...pack(full, c[3]!, c[2], thin), size: merged.size };
      const { value, commands } = await counting(() =>
        foldPacks([big, merged, p4], { gitDir: partial, objectsDir: path.join(partial, 'objects') }),
      );
      assert.equal(value.length, 2, `thin ${thin}`);
      assert.deepEqual(objectsOf(value[1]!), objectsOf(pack(full, c[3]!, c[0], false)), `thin ${thin}`);
      // The spared attempt failed, and the fold indexed both packs in a second scratch repository.
      assert.ok(commands.filter((x) => x === 'index-pack').length >= 2, commands.join(' '));
    }
    // Every pack known, but the repository lacks the merged pack's objects: indexed after all.
    const p4 = { ...pack(full, c[3]!, c[2], false), size: merged.size };
    rememberObjects(p4.inline!, await rangeObjects([c[3]!], [c[2]!], full));
    const { value, commands } = await counting(() =>
      foldPacks([big, merged, p4], { gitDir: partial, objectsDir: path.join(partial, 'objects') }),
    );
    assert.equal(value.length, 2);
    assert.deepEqual(objectsOf(value[1]!), objectsOf(pack(full, c[3]!, c[0], false)));
    assert.deepEqual(commands.filter((x) => x === 'index-pack').length, 2, commands.join(' '));
  });
});

describe('the memory of packs folded before', () => {
  it('is bounded: the oldest packs go first, and a pack of too many objects is not kept', () => {
    const key = (i: number) => Buffer.from(`pack ${i}`);
    for (let i = 0; i < 300; i++) rememberObjects(key(i), [`${i}`.padStart(40, '0')]);
    assert.equal(knownObjects(key(0)), undefined);
    assert.equal(knownObjects(key(43)), undefined);
    assert.deepEqual(knownObjects(key(299)), ['299'.padStart(40, '0')]);
    assert.ok(knownObjects(key(44)) !== undefined);
    const huge = Array.from({ length: 200_001 }, (_, i) => i.toString(16).padStart(40, '0'));
    rememberObjects(key(1000), huge);
    assert.equal(knownObjects(key(1000)), undefined);
    // Many objects in all: packs are dropped, oldest first, until the total fits again.
    rememberObjects(key(1001), huge.slice(0, 150_000));
    rememberObjects(key(1002), huge.slice(0, 100_000));
    assert.equal(knownObjects(key(1001)), undefined);
    assert.equal(knownObjects(key(1002))?.length, 100_000);
  });
});

describe('the memory of packs folded before, kept in the cache folder', () => {
  const full = path.join(top, 'disk.git');
  const c = history(full);
  const p2 = pack(full, c[1]!, c[0], true);
  const p3 = pack(full, c[2]!, c[1], true);
  const big: PackEntry = { ...pack(full, c[0]!, undefined, false), size: 1 << 20 };
  const objectsDir = path.join(full, 'objects');

  /** The last push's fold (made here), and the next push's list and what it tells of its new pack. */
  async function lastFold(memoDir: string) {
    const merged = (await foldPacks([big, p2, p3], { gitDir: full, objectsDir, memoDir }))[1]!;
    const p4 = { ...pack(full, c[3]!, c[2], true), size: merged.size };
    const told = { index: 2, objects: await rangeObjects([c[3]!], [c[2]!], full) };
    return { merged, next: [big, merged, p4], told };
  }

  it('spares the next helper process the index-pack of the pack the last push folded', async () => {
    const memoDir = path.join(top, 'memo-spared');
    const { next, told } = await lastFold(memoDir);
    const { value, commands } = foldInNewProcess(next, full, memoDir, told);
    assert.deepEqual(commands, ['pack-objects']);
    assert.equal(value.length, 2);
    assert.deepEqual(objectsOf(value[1]!), objectsOf(pack(full, c[3]!, c[0], false)));
    // The same fold where nothing was kept indexes the merged pack, and folds the same objects.
    const cold = foldInNewProcess(next, full, path.join(top, 'memo-empty'), told);
    assert.deepEqual(cold.commands.sort(), ['index-pack', 'pack-objects']);
    assert.deepEqual(objectsOf(cold.value[1]!), objectsOf(value[1]!));
  });

  it('takes a damaged list for none: the pack is indexed, the fold is the same, the list mended', async () => {
    const memoDir = path.join(top, 'memo-damaged');
    const { merged, next, told } = await lastFold(memoDir);
    const file = path.join(memoDir, packKey(merged.inline!));
    const good = fs.readFileSync(file, 'utf8').split('\n');
    assert.deepEqual([...good].sort(), objectsOf(merged));
    const damaged = [
      '',
      good.slice(1).join('\n'),
      [...good.slice(1), good[0]!.replace(/./, (x) => (x === 'a' ? 'b' : 'a'))].join('\n').toUpperCase(),
      [...good.slice(1), good[1]!].join('\n'),
      [...good, '0'.repeat(40)].join('\n'),
      `${good.join('\n')}\n`,
      Buffer.from(good.join('\n')).subarray(0, 41).toString(),
    ];
    for (const [i, text] of damaged.entries()) {
      fs.writeFileSync(file, text);
      const { value, commands } = foldInNewProcess(next, full, memoDir, told);
      assert.deepEqual(commands.sort(), ['index-pack', 'pack-objects'], `damage ${i}`);
      assert.deepEqual(objectsOf(value[1]!), objectsOf(pack(full, c[3]!, c[0], false)), `damage ${i}`);
      assert.deepEqual(fs.readFileSync(file, 'utf8').split('\n').sort(), objectsOf(merged), `damage ${i}`);
    }
  });

  it('is bounded: past 512 lists, the least recently written go, down to 384', () => {
    const memoDir = path.join(top, 'memo-bounded');
    fs.mkdirSync(memoDir);
    const now = Date.now() / 1000;
    for (let i = 0; i < 512; i++) {
      const file = path.join(memoDir, `old-${String(i).padStart(3, '0')}`);
      fs.writeFileSync(file, '');
      fs.utimesSync(file, now - 10_000 + i, now - 10_000 + i);
    }
    rememberObjects(Buffer.from('the 513th'), ['1'.repeat(40)], memoDir);
    const left = fs.readdirSync(memoDir).sort();
    assert.equal(left.length, 384);
    assert.ok(left.includes(packKey(Buffer.from('the 513th'))));
    // The 129 oldest are gone: old-000 .. old-128.
    assert.equal(left.filter((n) => n.startsWith('old-')).at(0), 'old-129');
  });
});
