// A repository whose refs are in a ref table (`dev.knotless.refs`, format.md "The ref table") is
// read from it by every reader: git lists its refs and clones from it, with the table in one record
// and with its refs in parts; its older `dev.knotless.ref` records are ignored with one warning that
// names them; a part that is not the one the table names refuses the whole table (writing one:
// ref-table-push.test.ts). A repository without a table is read from its ref records as before, at
// one more request (the table's proved absence).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import type { RefUpdate } from 'knotless-core/records/ref-table';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
// Repositories start on ref records (KNOTLESS_REF_TABLE=0): the tables here are written by hand from
// them, as a migration would.
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_COMPACT: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
});
after(() => proxy?.close());

const { put, refRecords, writeTable } = tableHands(t, 'alice.test');

/** A repository pushed with ref records: main at the first commit, `second` at the second. */
async function pushed(name: string): Promise<{ url: string; first: string; second: string }> {
  const res = await alice.knotless('repo', 'create', name);
  assert.equal(res.code, 0, res.stderr);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(alice, url);
  const first = await commitFiles(alice, dir, { 'a.txt': 'first\n' }, 'first');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  const second = await commitFiles(alice, dir, { 'a.txt': 'second\n' }, 'second');
  await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:refs/heads/second');
  return { url, first, second };
}

describe('reading a repository from its ref table', () => {
  it('lists and clones the refs the table holds, and warns of the ref records it ignores', async () => {
    const { url, first, second } = await pushed('tabled');
    const records = await refRecords('tabled');
    // The table says otherwise than the records: main at the second commit, a branch only it has.
    await writeTable('tabled', [
      { ref: 'refs/heads/main', target: second, packs: records.get('refs/heads/second')!.packs },
      { ref: 'refs/heads/only-in-table', target: first, packs: records.get('refs/heads/main')!.packs },
    ]);
    proxy!.reset();
    const ls = await alice.git(alice.dir(), 'ls-remote', url);
    assert.equal(ls.code, 0, ls.stderr);
    assert.deepEqual(
      lsRemote(ls.stdout),
      new Map([
        ['HEAD', second],
        ['refs/heads/main', second],
        ['refs/heads/only-in-table', first],
      ]),
    );
    // One proved read of the table, beside the listing of the ignored records.
    assert.equal(proxy!.count('com.atproto.sync.getRecord'), 1);
    assert.match(
      ls.stderr,
      /knotless: warning: alice\.test\/tabled keeps its refs in a ref table, so its 3 older dev\.knotless\.ref record\(s\) are ignored \(/,
    );
    assert.match(ls.stderr, new RegExp(`refs/heads/second at ${second.slice(0, 12)}`));

    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    assert.equal((await alice.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), second);
    assert.equal((await alice.ok(`${dir}/c`, 'rev-parse', 'origin/only-in-table')).trim(), first);
  });

  it('joins a large table from its parts', async () => {
    const { url, first, second } = await pushed('parted');
    const records = await refRecords('parted');
    const packs = records.get('refs/heads/second')!.packs;
    const many: RefUpdate[] = Array.from({ length: 3000 }, (_, i) => ({
      ref: `refs/tags/t${String(i).padStart(5, '0')}-${'x'.repeat(40)}`,
      target: first,
      packs: records.get('refs/heads/main')!.packs,
    }));
    await writeTable('parted', [{ ref: 'refs/heads/main', target: second, packs }, ...many]);
    proxy!.reset();
    const ls = await alice.git(alice.dir(), 'ls-remote', url);
    assert.equal(ls.code, 0, ls.stderr);
    const listed = lsRemote(ls.stdout);
    assert.equal(listed.get('refs/heads/main'), second);
    assert.equal([...listed.keys()].filter((r) => r.startsWith('refs/tags/')).length, 3000);
    assert.equal(listed.has('refs/heads/second'), false);
    // The table and each of its parts, each read with its proof.
    const parts = proxy!.count('com.atproto.sync.getRecord') - 1;
    assert.ok(parts >= 2, `${parts} parts`);

    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    assert.equal((await alice.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), second);
    // repo info counts the table's refs, not the two ref records it ignores.
    const info = await alice.knotless('repo', 'info', 'parted', '--json');
    assert.equal(info.code, 0, info.stderr);
    assert.equal((JSON.parse(info.stdout) as { refs: number }).refs, 3001);
  });

  it('refuses a table whose part is not the one it names', async () => {
    const { url, first } = await pushed('swapped');
    const records = await refRecords('swapped');
    const many: RefUpdate[] = Array.from({ length: 3000 }, (_, i) => ({
      ref: `refs/tags/t${String(i).padStart(5, '0')}-${'x'.repeat(40)}`,
      target: first,
      packs: records.get('refs/heads/main')!.packs,
    }));
    await writeTable('swapped', [{ ref: 'refs/heads/main', target: first, packs: [] }, ...many]);
    // One part rewritten under its key: its CID is no longer the one the table names.
    const list = new URL('/xrpc/com.atproto.repo.listRecords', t.net.pdsUrl);
    list.searchParams.set('repo', t.dids['alice.test']!);
    list.searchParams.set('collection', 'dev.knotless.refs.part');
    const body = (await (await fetch(list)).json()) as {
      records: { uri: string; value: { refs: unknown[] } }[];
    };
    const part = body.records.find((r) => r.uri.includes('/swapped~'))!;
    await put('dev.knotless.refs.part', part.uri.split('/').pop()!, {
      ...part.value,
      refs: part.value.refs.slice(1),
    });
    const ls = await alice.git(alice.dir(), 'ls-remote', url);
    assert.notEqual(ls.code, 0);
    assert.equal(ls.stdout, '');
    assert.match(
      ls.stderr,
      /The ref table of at:\/\/.*\/swapped is invalid \(part .* is not the one the table names/,
    );
    assert.doesNotMatch(ls.stderr, /\n.*at .*\.js:/);
  });

  it('reads a repository without a table from its ref records, proved at one more round trip', async () => {
    const { url, second } = await pushed('plain');
    proxy!.reset();
    const ls = await alice.git(alice.dir(), 'ls-remote', url);
    assert.equal(ls.code, 0, ls.stderr);
    assert.equal(lsRemote(ls.stdout).get('refs/heads/second'), second);
    assert.doesNotMatch(ls.stderr, /warning/);
    const counts = new Map<string, number>();
    for (const r of proxy!.requests) counts.set(r.nsid ?? r.path, (counts.get(r.nsid ?? r.path) ?? 0) + 1);
    // The listing is proved from the signed tree the table's absence came with: the proofs of the
    // ends of the repository's keys that proof's path does not hold (how many depends on the
    // account's tree), side by side, and every node within them built from the listing: none read.
    const proofs = counts.get('com.atproto.sync.getRecord') ?? 0;
    counts.delete('com.atproto.sync.getRecord');
    assert.ok(proofs >= 1 && proofs <= 3, `${proofs} getRecord`);
    assert.deepEqual(Object.fromEntries(counts), { 'com.atproto.repo.listRecords': 1 });
  });
});
