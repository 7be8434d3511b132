// A push to a repository whose refs are in a ref table (format.md "The ref table") writes the table:
// every ref in one putRecord of `dev.knotless.refs`, swapped on the CID it was read at, and no ref
// record. Two pushes that race each find the table moved, read it again and decide their own refs
// again with git's rules: to different branches both land, to one branch the one that is no longer
// a fast-forward is refused as git would refuse it. Pushes that fold their packs keep the table's
// pack list bounded; a large table keeps its parts and takes a push as one write of its own entries.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import type { RefUpdate } from 'knotless-core/records/ref-table';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
/** When set, the next putRecord waits for `release` after calling `held`. */
let gate: { held: () => void; release: Promise<void> } | undefined;
// Repositories start on ref records (KNOTLESS_REF_TABLE=0): the tables here are written by hand from
// them, as a migration would.
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));

before(async () => {
  await t.ready;
  proxy = await startProxy({
    target: t.net.pdsUrl,
    onRequest: async (req) => {
      if (gate === undefined || req.nsid !== 'com.atproto.repo.putRecord') return;
      const g = gate;
      gate = undefined;
      g.held();
      await g.release;
    },
  });
});
after(() => proxy?.close());

const { refRecords, writeTable, readTable } = tableHands(t, 'alice.test');

/** A repository on a ref table: main at a first commit (pushed as records, then moved to a table). */
async function tabled(name: string, extra: RefUpdate[] = []): Promise<{ url: string; first: string }> {
  const res = await alice.knotless('repo', 'create', name);
  assert.equal(res.code, 0, res.stderr);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(alice, url);
  const first = await commitFiles(alice, dir, { 'a.txt': 'first\n' }, 'first');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  const main = (await refRecords(name)).get('refs/heads/main')!;
  await writeTable(name, [{ ref: 'refs/heads/main', target: first, packs: main.packs }, ...extra]);
  return { url, first };
}

/** Runs `push` with its table write held until `meanwhile` is done; returns the push's result. */
async function held<T>(push: () => Promise<T>, meanwhile: () => Promise<void>): Promise<T> {
  let held!: () => void;
  let release!: () => void;
  const isHeld = new Promise<void>((r) => (held = r));
  gate = { held, release: new Promise<void>((r) => (release = r)) };
  const running = push();
  await isHeld;
  try {
    await meanwhile();
  } finally {
    release();
  }
  return running;
}

describe('pushing to a ref table', () => {
  it('writes every ref in one putRecord of the table, and no ref record', async () => {
    const { url, first } = await tabled('one');
    const before = (await readTable('one'))!;
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    const c = `${dir}/c`;
    const second = await commitFiles(alice, c, { 'a.txt': 'second\n' }, 'second');
    await alice.ok(c, 'tag', '-a', '-m', 'v1', 'v1');
    proxy!.reset();
    await alice.ok(c, 'push', '-q', 'origin', 'main', 'HEAD:refs/heads/topic', 'v1');
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 1);
    assert.equal(proxy!.count('com.atproto.repo.applyWrites'), 0);
    const after = (await readTable('one'))!;
    assert.equal(after.value.seq, before.value.seq + 1);
    assert.equal(after.value.head, 'refs/heads/main');
    assert.deepEqual(
      after.value.refs.map((r) => r.ref),
      ['refs/heads/main', 'refs/heads/topic', 'refs/tags/v1'],
    );
    // The records are as they were: only main, at the first commit.
    const records = await refRecords('one');
    assert.deepEqual([...records.keys()].sort(), ['HEAD', 'refs/heads/main']);
    assert.equal(records.get('refs/heads/main')!.target, first);

    const ls = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url));
    assert.equal(ls.get('HEAD'), second);
    assert.equal(ls.get('refs/heads/topic'), second);
    assert.equal(ls.get('refs/tags/v1^{}'), second);
    await alice.ok(dir, 'clone', '-q', url, 'again');
    assert.equal((await alice.ok(`${dir}/again`, 'rev-parse', 'HEAD')).trim(), second);

    // A delete is one write too.
    proxy!.reset();
    await alice.ok(c, 'push', '-q', 'origin', ':refs/heads/topic');
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 1);
    assert.deepEqual(
      (await readTable('one'))!.value.refs.map((r) => r.ref),
      ['refs/heads/main', 'refs/tags/v1'],
    );
  });

  it('keeps the pack table bounded over 20 pushes, each pack listed once', async () => {
    const { url } = await tabled('many');
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    const c = `${dir}/c`;
    for (let i = 0; i < 20; i++) {
      await commitFiles(alice, c, { [`f${i}.txt`]: `${i}\n` }, `c${i}`);
      await alice.ok(c, 'push', '-q', 'origin', 'main');
    }
    const table = (await readTable('many'))!.value;
    assert.equal(table.seq, 20);
    const main = table.refs.find((r) => r.ref === 'refs/heads/main')!;
    // One ref: its list is the whole pack table, which the pushes' folds keep logarithmic.
    assert.equal(main.packs!.length, table.packs.length);
    assert.equal(new Set(table.packs.map((p) => p.id)).size, table.packs.length);
    assert.ok(table.packs.length <= 6, `${table.packs.length} packs after 20 pushes`);
    await alice.ok(dir, 'clone', '-q', url, 'again');
    assert.equal(
      (await alice.ok(`${dir}/again`, 'rev-parse', 'HEAD')).trim(),
      (await alice.ok(c, 'rev-parse', 'HEAD')).trim(),
    );
  });

  it('lands two racing pushes to different branches, each deciding its own ref again', async () => {
    const { url } = await tabled('race');
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'a');
    await alice.ok(dir, 'clone', '-q', url, 'b');
    const a = await commitFiles(alice, `${dir}/a`, { 'a.txt': 'a\n' }, 'a');
    const b = await commitFiles(alice, `${dir}/b`, { 'b.txt': 'b\n' }, 'b');
    const first = await held(
      () => alice.git(`${dir}/a`, 'push', 'origin', 'HEAD:refs/heads/a'),
      async () => {
        await alice.ok(`${dir}/b`, 'push', '-q', 'origin', 'HEAD:refs/heads/b');
      },
    );
    assert.equal(first.code, 0, first.stderr);
    const ls = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/a'), a);
    assert.equal(ls.get('refs/heads/b'), b);
    assert.equal((await readTable('race'))!.value.seq, 2);
  });

  it('refuses the racing push to one branch that is no longer a fast-forward', async () => {
    const { url } = await tabled('same');
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'a');
    await alice.ok(dir, 'clone', '-q', url, 'b');
    await commitFiles(alice, `${dir}/a`, { 'a.txt': 'a\n' }, 'a');
    const b = await commitFiles(alice, `${dir}/b`, { 'b.txt': 'b\n' }, 'b');
    const first = await held(
      () => alice.git(`${dir}/a`, 'push', 'origin', 'main'),
      async () => {
        await alice.ok(`${dir}/b`, 'push', '-q', 'origin', 'main');
      },
    );
    assert.notEqual(first.code, 0);
    assert.match(first.stderr, /! \[(remote )?rejected\] +main -> main \(fetch first\)/);
    assert.doesNotMatch(first.stderr, /\n.*at .*\.js:/);
    assert.equal(lsRemote(await alice.ok(alice.dir(), 'ls-remote', url)).get('refs/heads/main'), b);
    // Fetched and rebased, it lands.
    await alice.ok(`${dir}/a`, 'pull', '-q', '--rebase', 'origin', 'main');
    await alice.ok(`${dir}/a`, 'push', '-q', 'origin', 'main');
    const main = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url)).get('refs/heads/main');
    assert.equal(main, (await alice.ok(`${dir}/a`, 'rev-parse', 'HEAD')).trim());
  });

  it('takes a push to a table with parts as one write of its own entries', async () => {
    const name = 'parted';
    const { url, first } = await tabled(name);
    const main = (await refRecords(name)).get('refs/heads/main')!;
    const many: RefUpdate[] = Array.from({ length: 3000 }, (_, i) => ({
      ref: `refs/tags/t${String(i).padStart(5, '0')}-${'x'.repeat(40)}`,
      target: first,
      packs: main.packs,
    }));
    await writeTable(name, [{ ref: 'refs/heads/main', target: first, packs: main.packs }, ...many]);
    const parts = (await readTable(name))!.value.parts!.map((p) => p.rkey);
    assert.ok(parts.length >= 2);
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    const c = `${dir}/c`;
    const second = await commitFiles(alice, c, { 'a.txt': 'second\n' }, 'second');
    proxy!.reset();
    await alice.ok(c, 'push', '-q', 'origin', 'main', ':refs/tags/t00001-' + 'x'.repeat(40));
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 1);
    const after = (await readTable(name))!.value;
    assert.deepEqual(
      after.parts!.map((p) => p.rkey),
      parts,
    );
    const ls = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/main'), second);
    assert.equal([...ls.keys()].filter((r) => r.startsWith('refs/tags/')).length, 2999);
  });

  it('writes a `repo commit` into the table, in one write of it', async () => {
    const { url } = await tabled('committed');
    const file = `${alice.dir()}/b.txt`;
    fs.writeFileSync(file, 'b\n');
    proxy!.reset();
    const commit = await alice.knotless(
      'repo',
      'commit',
      'committed',
      '-m',
      'm',
      '--branch',
      'other',
      '--add',
      `b.txt=${file}`,
    );
    assert.equal(commit.code, 0, commit.stderr);
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 1);
    const made = commit.stdout.trim();
    const table = (await readTable('committed'))!.value;
    assert.equal(table.refs.find((r) => r.ref === 'refs/heads/other')?.target, made);
    assert.equal((await refRecords('committed')).has('refs/heads/other'), false);
    const ls = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/other'), made);
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', '-b', 'other', url, 'c');
    assert.equal(fs.readFileSync(`${dir}/c/b.txt`, 'utf8'), 'b\n');
  });
});
