// The writers of refs other than a push and `repo commit`, on a repository whose refs are in a ref
// table (format.md "The ref table"): the default branch, `pr merge` and compaction each write the
// table (one putRecord swapped on the table read) and no ref record, and each, finding the table
// moved by a push meanwhile, reads it again and decides again, so that the push is kept.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { planMerge } from 'knotless-core/packs/geometric';
import type { RefUpdate } from 'knotless-core/records/ref-table';
import { knotless } from './helpers/cli.ts';
import { json, type ItemJson } from './helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
/** When set, the putRecord after `skip` more waits for `release` after calling `held`. */
let gate: { skip: number; held: () => void; release: Promise<void> } | undefined;
// Repositories start on ref records (KNOTLESS_REF_TABLE=0): the tables here are written by hand from
// them, as a migration would.
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_COMPACT: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));

before(async () => {
  await t.ready;
  proxy = await startProxy({
    target: t.net.pdsUrl,
    onRequest: async (req) => {
      if (gate === undefined || req.nsid !== 'com.atproto.repo.putRecord') return;
      if (gate.skip-- > 0) return;
      const g = gate;
      gate = undefined;
      g.held();
      await g.release;
    },
  });
});
after(() => proxy?.close());

const { refRecords, writeTable, readTable } = tableHands(t, 'alice.test');

/**
 * A repository on a ref table: `commits` commits pushed one by one to main (each its own pack, as
 * compaction is off), `branches` pushed at main's tip, all as ref records, then moved into a table.
 * Returns the clone it was pushed from.
 */
async function tabled(
  name: string,
  commits = 1,
  branches: string[] = [],
): Promise<{ url: string; dir: string }> {
  const res = await alice.knotless('repo', 'create', name);
  assert.equal(res.code, 0, res.stderr);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(alice, url);
  for (let i = 0; i < commits; i++) {
    await commitFiles(alice, dir, { 'a.txt': `${i}\n`, [`f${i}.txt`]: `file ${i}\n` }, `c${i}`);
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
  }
  for (const b of branches) await alice.ok(dir, 'push', '-q', 'origin', `main:refs/heads/${b}`);
  const records = await refRecords(name);
  const updates: RefUpdate[] = [...records.values()]
    .filter((r) => r.target !== undefined)
    .map((r) => ({ ref: r.ref, target: r.target!, packs: r.packs }));
  await writeTable(name, updates);
  return { url, dir };
}

/**
 * Runs `work` with its first putRecord (after `skip` more) held until `meanwhile` is done; returns
 * what `work` returns.
 */
async function held<T>(work: () => Promise<T>, meanwhile: () => Promise<void>, skip = 0): Promise<T> {
  let held!: () => void;
  let release!: () => void;
  const isHeld = new Promise<void>((r) => (held = r));
  gate = { skip, held, release: new Promise<void>((r) => (release = r)) };
  const running = work();
  // Work that ends without the write being held (it failed first) fails the test, not hangs it.
  const ended = await Promise.race([isHeld.then(() => false), running.then(() => true)]);
  if (ended) {
    gate = undefined;
    assert.fail(`the write was never held: ${JSON.stringify(await running)}`);
  }
  try {
    await meanwhile();
  } finally {
    release();
  }
  return running;
}

/** The ref records of `name` as the PDS holds them: ref → target (HEAD → the branch it names). */
async function recordsOf(name: string): Promise<Map<string, string | undefined>> {
  return new Map([...(await refRecords(name))].map(([ref, r]) => [ref, r.target ?? r.symref]));
}

describe('the default branch of a repository on a ref table', () => {
  it("is the table's head: shown, set with one write of the table, and no ref record written", async () => {
    const { url } = await tabled('dflt', 1, ['trunk']);
    const records = await recordsOf('dflt');
    const before = (await readTable('dflt'))!;
    assert.equal(before.value.head, 'refs/heads/main');
    assert.equal((await alice.knotless('repo', 'default-branch', 'dflt')).stdout, 'main\n');

    proxy!.reset();
    const moved = await alice.knotless('repo', 'default-branch', 'dflt', 'trunk', '--json');
    assert.equal(moved.code, 0, moved.stderr);
    assert.deepEqual(JSON.parse(moved.stdout), { repo: 'alice.test/dflt', branch: 'trunk', changed: true });
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 1);
    assert.equal(proxy!.count('com.atproto.repo.applyWrites'), 0);
    const after = (await readTable('dflt'))!;
    assert.equal(after.value.head, 'refs/heads/trunk');
    assert.equal(after.value.seq, before.value.seq + 1);
    assert.deepEqual(await recordsOf('dflt'), records);

    assert.equal((await alice.knotless('repo', 'default-branch', 'dflt')).stdout, 'trunk\n');
    const symref = await alice.ok(alice.dir(), 'ls-remote', '--symref', url, 'HEAD');
    assert.match(symref, /^ref: refs\/heads\/trunk\tHEAD$/m);
    const again = await alice.knotless('repo', 'default-branch', 'dflt', 'trunk');
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /HEAD already names trunk/);
    assert.equal((await readTable('dflt'))!.value.seq, after.value.seq);

    // main is no longer the current branch: a push may delete it, and a clone checks out trunk.
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    assert.equal((await alice.ok(`${dir}/c`, 'symbolic-ref', 'HEAD')).trim(), 'refs/heads/trunk');
    await alice.ok(`${dir}/c`, 'push', '-q', 'origin', ':main');
    assert.deepEqual(
      (await readTable('dflt'))!.value.refs.map((r) => r.ref),
      ['refs/heads/trunk'],
    );
  });

  it('refuses a branch the table does not hold, in one sentence, writing nothing', async () => {
    await tabled('dmiss');
    const before = (await readTable('dmiss'))!;
    const res = await alice.knotless('repo', 'default-branch', 'dmiss', 'nope');
    assert.equal(res.code, 17, res.stderr);
    assert.equal(res.stderr.trim().split('\n').length, 1, res.stderr);
    assert.match(res.stderr, /has no branch nope; push it first/);
    assert.equal((await readTable('dmiss'))!.cid, before.cid);
  });

  it('reads the table again when a push moved it meanwhile, and keeps the push', async () => {
    const { url, dir } = await tabled('drace', 1, ['trunk']);
    const pushed = await commitFiles(alice, dir, { 'b.txt': 'b\n' }, 'b');
    const res = await held(
      () => alice.knotless('repo', 'default-branch', 'drace', 'trunk'),
      async () => {
        await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:refs/heads/pushed');
      },
    );
    assert.equal(res.code, 0, res.stderr);
    const table = (await readTable('drace'))!.value;
    assert.equal(table.head, 'refs/heads/trunk');
    // The table was written twice after the set-up: the push, then the default branch over it.
    assert.equal(table.seq, 2);
    const ls = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/pushed'), pushed);
    const symref = await alice.ok(alice.dir(), 'ls-remote', '--symref', url, 'HEAD');
    assert.match(symref, /^ref: refs\/heads\/trunk\tHEAD$/m);
  });
});

describe('compacting a repository on a ref table', () => {
  it('writes the merged pack list into the table, and no ref record', async () => {
    const { url, dir } = await tabled('cmp', 6);
    const records = await recordsOf('cmp');
    const before = (await readTable('cmp'))!.value;
    const main = () => {
      const e = before.refs.find((r) => r.ref === 'refs/heads/main')!;
      return e.packs!.length;
    };
    // Six pushes, each a structure pack and a blob pack.
    assert.equal(main(), 12);
    proxy!.reset();
    const res = await alice.knotless('repo', 'compact', 'cmp');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /refs\/heads\/main: 12 packs → \d+/);
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 1);
    const after = (await readTable('cmp'))!.value;
    const packs = after.refs.find((r) => r.ref === 'refs/heads/main')!.packs!.map((i) => after.packs[i]!);
    assert.ok(packs.length < 12, `${packs.length} packs`);
    assert.equal(planMerge(packs as never), undefined);
    assert.equal(after.seq, before.seq + 1);
    assert.deepEqual(await recordsOf('cmp'), records);

    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.equal((await alice.git(`${out}/c`, 'fsck', '--full')).code, 0);
    assert.equal(
      (await alice.ok(`${out}/c`, 'rev-parse', 'HEAD')).trim(),
      (await alice.ok(dir, 'rev-parse', 'HEAD')).trim(),
    );
    assert.match((await alice.knotless('repo', 'compact', 'cmp')).stderr, /Nothing to compact/);
  });

  it('keeps a push that lands while it compacts, its pack after the merged one', async () => {
    const { url, dir } = await tabled('crace', 6);
    const pushed = await commitFiles(alice, dir, { 'late.txt': 'late\n' }, 'late');
    const res = await held(
      () => alice.knotless('repo', 'compact', 'crace'),
      async () => {
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
      },
    );
    assert.equal(res.code, 0, res.stderr);
    const table = (await readTable('crace'))!.value;
    const main = table.refs.find((r) => r.ref === 'refs/heads/main')!;
    assert.equal(main.target, pushed);
    // Six packs and the push's seventh, of which the six were merged.
    assert.ok(main.packs!.length < 7, `${main.packs!.length} packs`);
    assert.equal(table.seq, 2);
    assert.equal(lsRemote(await alice.ok(alice.dir(), 'ls-remote', url)).get('refs/heads/main'), pushed);
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    assert.equal((await alice.git(`${out}/c`, 'fsck', '--full')).code, 0);
    assert.equal((await alice.ok(`${out}/c`, 'rev-list', '--count', 'HEAD')).trim(), '7');
  });
});

describe('merging a pull request into a repository on a ref table', () => {
  it('writes the merged branch into the table, keeping a push that lands meanwhile', async () => {
    const { url, dir } = await tabled('mrg', 1);
    await alice.ok(dir, 'switch', '-q', '-c', 'topic');
    await commitFiles(alice, dir, { 'topic.txt': 'topic\n' }, 'topic work');
    await alice.ok(dir, 'push', '-q', 'origin', 'topic');
    await alice.ok(dir, 'switch', '-q', 'main');
    await commitFiles(alice, dir, { 'main.txt': 'main\n' }, 'main work');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    const records = await recordsOf('mrg');
    const pr = json<ItemJson>(
      await alice.knotless(
        'pr',
        'create',
        'alice.test/mrg',
        '--head',
        'alice.test/mrg:topic',
        '--title',
        'Topic',
        '--json',
      ),
    );
    const other = await commitFiles(alice, dir, { 'other.txt': 'other\n' }, 'other');
    const res = await held(
      () => alice.knotless('pr', 'merge', 'alice.test/mrg', pr.id, '--json'),
      async () => {
        await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:refs/heads/other');
      },
    );
    assert.equal(res.code, 0, res.stderr);
    const merged = json<ItemJson>(res).merged!;
    const ls = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/other'), other);
    assert.equal(ls.get('refs/heads/main'), merged);
    const table = (await readTable('mrg'))!.value;
    assert.equal(table.refs.find((r) => r.ref === 'refs/heads/main')!.target, merged);
    // Two pushes after the set-up, the racing one, then the merge written over it.
    assert.equal(table.seq, 4);
    assert.deepEqual(await recordsOf('mrg'), records);

    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', url, 'c');
    const c = `${out}/c`;
    assert.equal((await alice.ok(c, 'rev-parse', 'HEAD')).trim(), merged);
    assert.equal((await alice.git(c, 'fsck', '--full')).code, 0);
    assert.equal((await alice.ok(c, 'show', 'HEAD:topic.txt')).trim(), 'topic');
    assert.equal((await alice.ok(c, 'show', 'HEAD:main.txt')).trim(), 'main');
    const view = json<ItemJson>(await alice.knotless('pr', 'view', 'alice.test/mrg', pr.id, '--json'));
    assert.equal(view.state, 'merged');
  });

  it('writes nothing when the base branch itself moved while merging', async () => {
    const { url, dir } = await tabled('mmove', 1);
    await alice.ok(dir, 'switch', '-q', '-c', 'topic');
    await commitFiles(alice, dir, { 'topic.txt': 'topic\n' }, 'topic work');
    await alice.ok(dir, 'push', '-q', 'origin', 'topic');
    await alice.ok(dir, 'switch', '-q', 'main');
    const pr = json<ItemJson>(
      await alice.knotless(
        'pr',
        'create',
        'alice.test/mmove',
        '--head',
        'alice.test/mmove:topic',
        '--title',
        'T',
        '--json',
      ),
    );
    const moved = await commitFiles(alice, dir, { 'm.txt': 'm\n' }, 'moved');
    const res = await held(
      () => alice.knotless('pr', 'merge', 'alice.test/mmove', pr.id),
      async () => {
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
      },
    );
    assert.equal(res.code, 15, res.stderr);
    // One sentence, after the warning that the records the table was made from are ignored.
    const said = res.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.startsWith('knotless: warning:'));
    assert.equal(said.length, 1, res.stderr);
    assert.match(res.stderr, /main of alice\.test\/mmove moved while merging; nothing was written/);
    assert.equal(lsRemote(await alice.ok(alice.dir(), 'ls-remote', url)).get('refs/heads/main'), moved);
  });
});

/** Every record key of `collection` in alice's account. */
async function keysOf(collection: string): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | undefined;
  do {
    const url = new URL('/xrpc/com.atproto.repo.listRecords', t.net.pdsUrl);
    url.searchParams.set('repo', t.dids['alice.test']!);
    url.searchParams.set('collection', collection);
    url.searchParams.set('limit', '100');
    if (cursor !== undefined) url.searchParams.set('cursor', cursor);
    const body = (await (await fetch(url)).json()) as { records: { uri: string }[]; cursor?: string };
    out.push(...body.records.map((r) => r.uri.split('/').pop()!));
    cursor = body.records.length === 0 ? undefined : body.cursor;
  } while (cursor !== undefined);
  return out.sort();
}

describe('deleting a repository on a ref table', () => {
  it('deletes the table, its parts and every leftover ref record; a delete cut short finishes when run again', async () => {
    const { url, dir } = await tabled('gone', 1, ['b']);
    const first = (await alice.ok(dir, 'rev-parse', 'HEAD')).trim();
    const main = (await refRecords('gone')).get('refs/heads/main')!;
    // A table large enough for parts, its refs beside the ref records it was made from.
    const many: RefUpdate[] = Array.from({ length: 3000 }, (_, i) => ({
      ref: `refs/tags/t${String(i).padStart(5, '0')}-${'x'.repeat(40)}`,
      target: first,
      packs: main.packs,
    }));
    await writeTable('gone', [{ ref: 'refs/heads/main', target: first, packs: main.packs }, ...many]);
    const parts = (await readTable('gone'))!.value.parts!.map((p) => p.rkey);
    assert.ok(parts.length >= 2);
    // What is not this repository's stays: another repository's table, and alice's table (and its
    // part) as a maintainer of someone else's repository of the same name.
    const { url: keptUrl } = await tabled('gone2');
    const foreign = 'gone~did:plc:aaaaaaaaaaaaaaaaaaaaaaaa';
    const { put } = tableHands(t, 'alice.test');
    await put('dev.knotless.refs', foreign, {
      repo: 'at://did:plc:aaaaaaaaaaaaaaaaaaaaaaaa/dev.knotless.repo/gone',
      refs: [],
      seq: 0,
      updatedAt: new Date().toISOString(),
    });
    await put('dev.knotless.refs.part', `${foreign}~${'0'.repeat(32)}`, { repo: 'x', refs: [] });
    const refKeys = (await keysOf('dev.knotless.ref')).filter((k) => k.startsWith('gone~'));
    assert.ok(refKeys.length >= 3, refKeys.join());

    // Killed after its ref records went: the table still holds the repository's refs.
    const cut = await knotless(['repo', 'delete', 'gone', '--yes'], {
      env: { ...alice.env, KNOTLESS_COMPACT: '0', KNOTLESS_CRASH_AT: 'delete:refs-deleted' },
    });
    assert.notEqual(cut.code, 0);
    assert.deepEqual(
      (await keysOf('dev.knotless.ref')).filter((k) => k.startsWith('gone~')),
      [],
    );
    assert.ok((await keysOf('dev.knotless.repo')).includes('gone'));
    assert.equal(lsRemote(await alice.ok(alice.dir(), 'ls-remote', url)).get('refs/heads/main'), first);

    const del = await alice.knotless('repo', 'delete', 'gone', '--yes');
    assert.equal(del.code, 0, del.stderr);
    assert.match(del.stderr, /Deleted alice\.test\/gone \(3001 refs\)/);
    assert.equal(await readTable('gone'), undefined);
    assert.deepEqual(
      (await keysOf('dev.knotless.refs.part')).filter((k) => k.startsWith('gone~')),
      [`${foreign}~${'0'.repeat(32)}`],
    );
    assert.deepEqual(
      (await keysOf('dev.knotless.refs')).filter((k) => k.startsWith('gone')),
      ['gone2', foreign],
    );
    assert.ok(!(await keysOf('dev.knotless.repo')).includes('gone'));
    const ls = await alice.git(alice.dir(), 'ls-remote', url);
    assert.notEqual(ls.code, 0);
    // The other repository is whole.
    assert.ok(lsRemote(await alice.ok(alice.dir(), 'ls-remote', keptUrl)).has('refs/heads/main'));
    // A repository of that name made again starts empty, with no table.
    assert.equal((await alice.knotless('repo', 'create', 'gone')).code, 0);
    assert.equal((await alice.ok(alice.dir(), 'ls-remote', url)).trim(), '');
  });
});

describe('forking a repository on a ref table', () => {
  it("gives the fork a table of its own in the forker's account, with every ref and HEAD", async () => {
    const { url } = await tabled('orig', 2, ['b']);
    const res = await alice.knotless('repo', 'fork', 'alice.test/orig', '--name', 'copy');
    assert.equal(res.code, 0, res.stderr);
    const source = (await readTable('orig'))!.value;
    const fork = (await readTable('copy'))!.value;
    assert.equal(fork.head, 'refs/heads/main');
    assert.equal(fork.seq, 0);
    assert.deepEqual(
      fork.refs.map((r) => [r.ref, r.target]),
      source.refs.map((r) => [r.ref, r.target]),
    );
    assert.deepEqual([...(await refRecords('copy')).keys()], []);
    const forkUrl = 'knotless://alice.test/copy';
    assert.deepEqual(
      lsRemote(await alice.ok(alice.dir(), 'ls-remote', forkUrl)),
      lsRemote(await alice.ok(alice.dir(), 'ls-remote', url)),
    );
    const out = alice.dir();
    await alice.ok(out, 'clone', '-q', forkUrl, 'c');
    assert.equal((await alice.git(`${out}/c`, 'fsck', '--full')).code, 0);
    // A push to the fork writes its table.
    const pushed = await commitFiles(alice, `${out}/c`, { 'f.txt': 'fork\n' }, 'in the fork');
    await alice.ok(`${out}/c`, 'push', '-q', 'origin', 'main');
    assert.equal(
      (await readTable('copy'))!.value.refs.find((r) => r.ref === 'refs/heads/main')!.target,
      pushed,
    );
    const again = await alice.knotless('repo', 'fork', 'alice.test/orig', '--name', 'copy');
    assert.equal(again.code, 6, again.stderr);
  });

  it('keeps the table another run of the same fork wrote meanwhile', async () => {
    const { url } = await tabled('orig2', 1, ['b']);
    const fork = () => alice.knotless('repo', 'fork', 'alice.test/orig2', '--name', 'copy2');
    let second: Awaited<ReturnType<typeof fork>> | undefined;
    let written: string | undefined;
    // The repository record is the first putRecord; the table is held.
    const first = await held(
      fork,
      async () => {
        second = await fork();
        written = (await readTable('copy2'))?.cid;
      },
      1,
    );
    assert.equal(second!.code, 0, second!.stderr);
    assert.equal(first.code, 0, first.stderr);
    const stored = (await readTable('copy2'))!;
    const table = stored.value;
    // The second run's table stands: the first found it written and had nothing left to add.
    assert.equal(stored.cid, written);
    assert.equal(table.seq, 0);
    assert.equal(table.head, 'refs/heads/main');
    assert.deepEqual(
      lsRemote(await alice.ok(alice.dir(), 'ls-remote', 'knotless://alice.test/copy2')),
      lsRemote(await alice.ok(alice.dir(), 'ls-remote', url)),
    );
  });
});
