// `knotless repo migrate` (knotless-core's migrateToTable, format.md "Old repositories") moves a
// repository from one dev.knotless.ref record per ref to its owner's ref table: the same refs, HEAD
// and packs, created with swapCommit on the commit the records were listed at, then the records
// deleted 199 a commit. A clone after it equals a clone before it; a process killed at any step
// leaves either nothing changed or a table a second run finishes; a push that lands while the
// migration reads is in the table.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { knotless, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test', 'bob.test']);
let proxy: Proxy | undefined;
/** When set, the next putRecord through the proxy waits for `release` after calling `held`. */
let gate: { held: () => void; release: Promise<void> } | undefined;
/**
 * The old layout, one record per ref: what these tests migrate, made as a machine that keeps it
 * makes it (the layout versions of knotless from before the ref table read).
 */
const OLD = { KNOTLESS_REF_TABLE: '0' };
/** alice, straight to her PDS, keeping repositories on ref records (the CLI's default is a table). */
const direct = useGitUser(t, 'alice.test', () => OLD);
/** The knotless CLI as alice on the same machine, through the counting (and holding) proxy. */
const proxied = (...args: string[]) =>
  knotless(args, { env: { ...direct.env, KNOTLESS_SERVICE: proxy!.url } });

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

const { readTable } = tableHands(t, 'alice.test');

/**
 * Every dev.knotless.ref record of repository `name`, by key, read page by page from the PDS; every
 * one of the account when `name` is undefined.
 */
async function refRecordKeys(name: string | undefined): Promise<string[]> {
  const keys: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const url = new URL('/xrpc/com.atproto.repo.listRecords', t.net.pdsUrl);
    url.searchParams.set('repo', t.dids['alice.test']!);
    url.searchParams.set('collection', 'dev.knotless.ref');
    url.searchParams.set('limit', '100');
    if (cursor !== undefined) url.searchParams.set('cursor', cursor);
    const body = (await (await fetch(url)).json()) as { records: { uri: string }[]; cursor?: string };
    for (const r of body.records) {
      const key = r.uri.split('/').at(-1)!;
      if (name === undefined || key.startsWith(`${name}~`)) keys.push(key);
    }
    if (body.records.length === 0 || body.cursor === undefined) return keys;
    cursor = body.cursor;
  }
}

interface Report {
  repo: string;
  refs: number;
  head: string | null;
  created: boolean;
  parts: number;
  deleted: number;
  writes: number;
  points: number;
}

/** `knotless repo migrate NAME --json` (through the proxy unless told), which must succeed. */
async function migrate(name: string, run = proxied): Promise<Report> {
  const res = await run('repo', 'migrate', name, '--json');
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout) as Report;
}

/** `knotless repo migrate NAME` killed at crash point `point` (SIGKILL: no cleanup, as a power cut). */
async function migrateKilledAt(name: string, point: string): Promise<void> {
  const res = await knotless(['repo', 'migrate', name], { env: { ...direct.env, KNOTLESS_CRASH_AT: point } });
  assert.equal(res.code, null, `not killed at ${point}: ${res.stderr}`);
}

/** A clone of everything (`--mirror`): its refs with their ids, HEAD, and every object it holds. */
async function mirrorOf(
  user: GitUser,
  url: string,
): Promise<{ refs: string; head: string; objects: string }> {
  const dir = user.dir();
  await user.ok(dir, 'clone', '-q', '--mirror', url, 'm.git');
  const m = path.join(dir, 'm.git');
  await user.ok(m, 'fsck', '--full', '--strict');
  return {
    refs: await user.ok(m, 'for-each-ref', '--format=%(objectname) %(refname)'),
    head: (await user.ok(m, 'symbolic-ref', 'HEAD')).trim(),
    objects: (await user.ok(m, 'rev-list', '--all', '--objects')).split('\n').sort().join('\n'),
  };
}

/**
 * A repository pushed as ref records: main, trunk (HEAD, set with `repo default-branch`), a
 * lightweight and an annotated tag, and `extra` more tags with long names over three commits
 * (written straight into packed-refs: a cheap generator), pushed with --mirror.
 */
async function recorded(name: string, extra: number): Promise<{ url: string; dir: string; refs: number }> {
  const made = await direct.knotless('repo', 'create', name);
  assert.equal(made.code, 0, made.stderr);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(direct, url);
  const commits = [await commitFiles(direct, dir, { 'a.txt': 'first\n' }, 'first')];
  commits.push(await commitFiles(direct, dir, { 'b.txt': 'second\n' }, 'second'));
  await direct.ok(dir, 'branch', 'trunk');
  commits.push(await commitFiles(direct, dir, { 'c.txt': 'third\n' }, 'third'));
  await direct.ok(dir, 'tag', 'light', commits[0]!);
  await direct.ok(dir, 'tag', '-a', '-m', 'release one', 'v1', commits[1]!);
  const lines: string[] = [];
  for (let i = 0; i < extra; i++)
    lines.push(
      `${commits[i % commits.length]!} refs/tags/generated/a-long-name-so-that-the-table-needs-parts-${String(i).padStart(5, '0')}`,
    );
  if (lines.length > 0) fs.writeFileSync(path.join(dir, '.git', 'packed-refs'), lines.join('\n') + '\n');
  await direct.ok(dir, 'push', '-q', '--mirror', 'origin');
  const head = await direct.knotless('repo', 'default-branch', name, 'trunk');
  assert.equal(head.code, 0, head.stderr);
  return { url, dir, refs: extra + 4 };
}

/** Runs `run` with the next putRecord through the proxy held until `meanwhile` is done. */
async function held<T>(run: () => Promise<T>, meanwhile: () => Promise<void>): Promise<T> {
  let held!: () => void;
  let release!: () => void;
  const isHeld = new Promise<void>((r) => (held = r));
  gate = { held, release: new Promise<void>((r) => (release = r)) };
  const running = run();
  await isHeld;
  try {
    await meanwhile();
  } finally {
    release();
  }
  return running;
}

describe('knotless repo migrate', () => {
  it('moves 2,500 refs, tags and HEAD into a table with parts: a clone after equals a clone before', async () => {
    const { url, refs } = await recorded('big', 2500);
    const lsBefore = lsRemote(await direct.ok(direct.dir(), 'ls-remote', url));
    assert.equal(lsBefore.get('HEAD'), lsBefore.get('refs/heads/trunk'));
    assert.ok(lsBefore.has('refs/tags/v1^{}'), 'the annotated tag is listed peeled');
    const before = await mirrorOf(direct, url);
    assert.equal(before.head, 'refs/heads/trunk');
    const records = (await refRecordKeys('big')).length;
    assert.equal(records, refs + 1, 'a record per ref, and HEAD');

    proxy!.reset();
    const done = await migrate('big');
    const parts = done.parts;
    assert.ok(parts >= 2, `${parts} parts`);
    const deleteBatches = Math.ceil(records / 199);
    assert.deepEqual(done, {
      repo: 'alice.test/big',
      refs,
      head: 'refs/heads/trunk',
      created: true,
      parts,
      deleted: records,
      writes: parts + 1 + deleteBatches,
      points: 2 * (parts + 1) + records,
    });
    // What reached the PDS is what the report says: parts and the table (putRecord), and the
    // deletes in commits of at most 199.
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), parts + 1);
    assert.equal(proxy!.count('com.atproto.repo.applyWrites'), deleteBatches);
    assert.equal(
      proxy!.requests.reduce((n, r) => n + r.points, 0),
      done.points,
    );

    assert.deepEqual(await refRecordKeys('big'), []);
    const table = (await readTable('big'))!;
    assert.equal(table.value.head, 'refs/heads/trunk');
    assert.equal(table.value.parts!.length, parts);
    assert.equal(table.value.seq, 0);

    const res = await direct.git(direct.dir(), 'ls-remote', url);
    assert.equal(res.code, 0, res.stderr);
    assert.doesNotMatch(res.stderr, /ignored/);
    assert.deepEqual(lsRemote(res.stdout), lsBefore);
    assert.deepEqual(await mirrorOf(direct, url), before);

    // Again: nothing to do, nothing written.
    proxy!.reset();
    const again = await migrate('big');
    assert.deepEqual(
      { created: again.created, deleted: again.deleted, writes: again.writes, points: again.points },
      { created: false, deleted: 0, writes: 0, points: 0 },
    );
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 0);
  });

  it('says what it did in one line without --json', async () => {
    await recorded('words', 0);
    const res = await direct.knotless('repo', 'migrate', 'words');
    assert.equal(res.code, 0, res.stderr);
    assert.equal(res.stdout, '');
    assert.equal(
      res.stderr,
      'alice.test/words: 4 ref(s) and HEAD (trunk) moved into its ref table; 5 old ref record(s) deleted; 7 point(s) spent in 2 write(s).\n',
    );
  });

  it('changes nothing when killed before the table is written', async () => {
    const { url } = await recorded('crash-before', 0);
    const keys = (await refRecordKeys('crash-before')).sort();
    const ls = await direct.ok(direct.dir(), 'ls-remote', url);
    await migrateKilledAt('crash-before', 'migrate:before-table-write');
    assert.equal(await readTable('crash-before'), undefined);
    assert.deepEqual((await refRecordKeys('crash-before')).sort(), keys);
    assert.equal(await direct.ok(direct.dir(), 'ls-remote', url), ls);
  });

  it('killed after the table (or between its deletes), reads the table; a second run deletes the rest', async () => {
    // 250 refs: the deletes take two commits, and the kill lands after the first.
    for (const [name, point, left] of [
      ['crash-table', 'migrate:table-written', 255],
      ['crash-deletes', 'migrate:records-deleted', 255 - 199],
    ] as const) {
      const { url } = await recorded(name, 250);
      const ls = lsRemote(await direct.ok(direct.dir(), 'ls-remote', url));
      const before = await mirrorOf(direct, url);
      await migrateKilledAt(name, point);
      assert.notEqual(await readTable(name), undefined, `${point}: the table was written`);
      assert.equal((await refRecordKeys(name)).length, left, point);
      // Readers read the table, and say once that the leftover records are ignored.
      const res = await direct.git(direct.dir(), 'ls-remote', url);
      assert.equal(res.code, 0, res.stderr);
      assert.deepEqual(lsRemote(res.stdout), ls);
      assert.match(res.stderr, new RegExp(`its ${left} older dev.knotless.ref record\\(s\\) are ignored`));
      // knotless verify proves the table, every ref of it, and says nothing of the records left.
      const verified = await direct.knotless('verify', `alice.test/${name}`, '--json');
      assert.equal(verified.code, 0, verified.stderr);
      const verdict = JSON.parse(verified.stdout) as {
        layout: string;
        complete: boolean;
        refs: Array<{ ref: string; target?: string; verified: boolean }>;
      };
      assert.equal(verdict.layout, 'table', point);
      assert.equal(verdict.complete, true, point);
      assert.ok(verdict.refs.every((r) => r.verified));
      assert.deepEqual(
        verdict.refs.filter((r) => r.target !== undefined).map((r) => [r.ref, r.target]),
        [...ls]
          .filter(([ref]) => ref !== 'HEAD' && !ref.endsWith('^{}'))
          .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
      );
      const again = await migrate(name);
      assert.deepEqual(
        { created: again.created, refs: again.refs, deleted: again.deleted, points: again.points },
        { created: false, refs: 254, deleted: left, points: left },
      );
      assert.deepEqual(await refRecordKeys(name), []);
      const after = await direct.git(direct.dir(), 'ls-remote', url);
      assert.equal(after.stderr, '');
      assert.deepEqual(lsRemote(after.stdout), ls);
      assert.deepEqual(await mirrorOf(direct, url), before);
    }
  });

  it('takes a push that lands while it reads into the table', async () => {
    const { url } = await recorded('race', 0);
    const work = direct.dir();
    await direct.ok(work, 'clone', '-q', url, 'c');
    const c = path.join(work, 'c');
    await direct.ok(c, 'checkout', '-q', 'main');
    const tip = await commitFiles(direct, c, { 'd.txt': 'raced\n' }, 'raced');
    // The migration's table write waits while a push (straight to the PDS) moves main and adds a
    // branch: the table's swapCommit is refused, and the migration reads the records again.
    const done = await held(
      () => migrate('race'),
      async () => {
        await direct.ok(c, 'push', '-q', 'origin', 'main', 'main:refs/heads/raced');
      },
    );
    assert.equal(done.created, true);
    assert.equal(done.refs, 5);
    assert.equal(proxy!.count('com.atproto.repo.putRecord') >= 2, true, 'the table was written again');
    const table = (await readTable('race'))!.value;
    assert.equal(table.refs.find((r) => r.ref === 'refs/heads/main')?.target, tip);
    assert.equal(table.refs.find((r) => r.ref === 'refs/heads/raced')?.target, tip);
    assert.deepEqual(await refRecordKeys('race'), []);
    const ls = lsRemote(await direct.ok(direct.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/main'), tip);
    assert.equal(ls.get('refs/heads/raced'), tip);
  });

  it('moves a private repository onto its table, sealed: nothing of its refs in the clear, its records deleted', async () => {
    const made = await direct.knotless('repo', 'create', 'hidden', '--private');
    assert.equal(made.code, 0, made.stderr);
    const dir = await newRepo(direct, 'knotless://alice.test/hidden');
    const tip = await commitFiles(direct, dir, { 'a.txt': 'secret\n' }, 'first');
    await direct.ok(dir, 'push', '-q', 'origin', 'main');
    assert.equal((await refRecordKeys('hidden')).length, 2, 'main and HEAD, sealed');
    const res = await proxied('repo', 'migrate', 'hidden');
    assert.equal(res.code, 0, res.stderr);
    const table = await readTable('hidden');
    assert.deepEqual(Object.keys(table?.value ?? {}).sort(), ['$type', 'blobs', 'epoch', 'repo', 'sealed']);
    assert.doesNotMatch(JSON.stringify(table!.value), /refs\/heads/);
    assert.deepEqual(await refRecordKeys('hidden'), []);
    const ls = lsRemote(await direct.ok(direct.dir(), 'ls-remote', 'knotless://alice.test/hidden'));
    assert.equal(ls.get('refs/heads/main'), tip);
    assert.equal(ls.get('HEAD'), tip);
  });

  it('refuses another account, a missing repository and a bad name, each in one sentence', async () => {
    const other = await direct.knotless('repo', 'migrate', 'bob.test/x');
    assert.notEqual(other.code, 0);
    const missing = await direct.knotless('repo', 'migrate', 'nothing-here');
    assert.equal(missing.code, 7, missing.stderr);
    assert.equal(
      missing.stderr,
      'knotless: alice.test/nothing-here does not exist; check the name (`knotless repo list` lists yours).\n',
    );
    const bad = await direct.knotless('repo', 'migrate', 'a~b');
    assert.equal(bad.code, 2, bad.stderr);
    for (const r of [other, missing, bad]) {
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.doesNotMatch(r.stderr, /\n\s+at /);
    }
  });
});

describe('by default (KNOTLESS_REF_TABLE unset)', () => {
  const run = (...args: string[]) => knotless(args, { env: direct.env });
  const git = (cwd: string, ...args: string[]) => runProcess('git', args, { env: direct.env, cwd });

  it('makes repo create start a repository on an empty table, which its first push writes', async () => {
    const made = await run('repo', 'create', 'born-tabled');
    assert.equal(made.code, 0, made.stderr);
    const empty = (await readTable('born-tabled'))!;
    assert.deepEqual(
      { seq: empty.value.seq, refs: empty.value.refs, head: empty.value.head },
      {
        seq: 0,
        refs: [],
        head: undefined,
      },
    );
    const dir = await newRepo(direct, 'knotless://alice.test/born-tabled');
    const tip = await commitFiles(direct, dir, { 'a.txt': 'a\n' }, 'first');
    const pushed = await git(dir, 'push', '-q', 'origin', 'main');
    assert.equal(pushed.code, 0, pushed.stderr);
    const table = (await readTable('born-tabled'))!.value;
    assert.equal(table.head, 'refs/heads/main');
    assert.deepEqual(
      table.refs.map((r) => [r.ref, r.target]),
      [['refs/heads/main', tip]],
    );
    assert.deepEqual(await refRecordKeys('born-tabled'), []);
    const ls = lsRemote(await direct.ok(direct.dir(), 'ls-remote', 'knotless://alice.test/born-tabled'));
    assert.equal(ls.get('HEAD'), tip);
  });

  it('makes a push to a repository on ref records move it onto its table first', async () => {
    const { url, dir } = await recorded('moved-by-push', 0);
    await direct.ok(dir, 'checkout', '-q', 'main');
    const tip = await commitFiles(direct, dir, { 'e.txt': 'e\n' }, 'pushed after');
    const pushed = await git(dir, 'push', 'origin', 'main');
    assert.equal(pushed.code, 0, pushed.stderr);
    assert.match(
      pushed.stderr,
      /knotless: moved the 4 ref\(s\) of alice\.test\/moved-by-push into its ref table first \(5 old ref record\(s\) deleted, 7 point\(s\)\)\./,
    );
    assert.deepEqual(await refRecordKeys('moved-by-push'), []);
    const table = (await readTable('moved-by-push'))!.value;
    assert.equal(table.head, 'refs/heads/trunk');
    assert.equal(table.refs.find((r) => r.ref === 'refs/heads/main')?.target, tip);
    const ls = lsRemote(await direct.ok(direct.dir(), 'ls-remote', url));
    assert.equal(ls.get('refs/heads/main'), tip);
    assert.equal(ls.get('HEAD'), ls.get('refs/heads/trunk'));
  });

  it('makes repo maintainer add move a repository on ref records onto its table first, in one line', async () => {
    const { url } = await recorded('team-moved', 0);
    const ls = lsRemote(await direct.ok(direct.dir(), 'ls-remote', url));
    const added = await run('repo', 'maintainer', 'add', 'team-moved', 'bob.test');
    assert.equal(added.code, 0, added.stderr);
    assert.equal(
      added.stderr,
      'knotless: moved the 4 ref(s) of alice.test/team-moved into its ref table first (5 old ref record(s) deleted, 7 point(s)).\n' +
        'alice.test/team-moved: bob.test is a maintainer now, and may push to it (git push knotless://alice.test/team-moved …).\n',
    );
    const table = (await readTable('team-moved'))!.value;
    assert.deepEqual(
      table.maintainers?.map((m) => m.did),
      [t.dids['bob.test']],
    );
    assert.equal(table.head, 'refs/heads/trunk');
    assert.deepEqual(await refRecordKeys('team-moved'), []);
    assert.deepEqual(lsRemote(await direct.ok(direct.dir(), 'ls-remote', url)), ls);
    // Added again: the table is there, nothing moves, nothing is said of a move.
    const again = await run('repo', 'maintainer', 'add', 'team-moved', 'bob.test');
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr, 'alice.test/team-moved: bob.test is a maintainer already.\n');
  });

  it('keeps a private repository on ref records: its pushes write sealed records, no table; maintainer add refuses an account with no key', async () => {
    const made = await run('repo', 'create', 'kept-private', '--private');
    assert.equal(made.code, 0, made.stderr);
    assert.equal(await readTable('kept-private'), undefined);
    const url = 'knotless://alice.test/kept-private';
    const dir = await newRepo(direct, url);
    const tip = await commitFiles(direct, dir, { 'a.txt': 'secret\n' }, 'first');
    const before = new Set(await refRecordKeys(undefined));
    const pushed = await git(dir, 'push', 'origin', 'main');
    assert.equal(pushed.code, 0, pushed.stderr);
    assert.doesNotMatch(pushed.stderr, /ref table/);
    assert.equal(await readTable('kept-private'), undefined);
    // Sealed ref records, one for main and one for HEAD, under keys that do not say what they hold.
    const added = (await refRecordKeys(undefined)).filter((k) => !before.has(k));
    assert.equal(added.length, 2, added.join(' '));
    for (const k of added) assert.doesNotMatch(k, /main|HEAD/);
    const ls = lsRemote((await git(direct.dir(), 'ls-remote', url)).stdout);
    assert.equal(ls.get('refs/heads/main'), tip);
    assert.equal(ls.get('HEAD'), tip);
    proxy!.reset();
    const refused = await knotless(['repo', 'maintainer', 'add', 'kept-private', 'bob.test'], {
      env: { ...direct.env, KNOTLESS_SERVICE: proxy!.url },
    });
    // A maintainer of a private repository is shared it first; bob has published no key to share it to.
    assert.equal(refused.code, 17, refused.stderr);
    assert.equal(
      refused.stderr,
      'knotless: bob.test has published no knotless key; ask them to run `knotless key list` once (it makes and publishes one), then share again.\n',
    );
    for (const w of ['putRecord', 'applyWrites', 'deleteRecord', 'createRecord'])
      assert.equal(proxy!.count(`com.atproto.repo.${w}`), 0, w);
    assert.equal(await readTable('kept-private'), undefined);
  });

  it('leaves a repository on ref records with KNOTLESS_REF_TABLE=0: repo create makes no table, a push writes records', async () => {
    const made = await direct.knotless('repo', 'create', 'stays-old');
    assert.equal(made.code, 0, made.stderr);
    assert.equal(await readTable('stays-old'), undefined);
    const dir = await newRepo(direct, 'knotless://alice.test/stays-old');
    const tip = await commitFiles(direct, dir, { 'a.txt': 'a\n' }, 'first');
    const pushed = await direct.git(dir, 'push', 'origin', 'main');
    assert.equal(pushed.code, 0, pushed.stderr);
    assert.doesNotMatch(pushed.stderr, /ref table/);
    assert.equal(await readTable('stays-old'), undefined);
    assert.equal((await refRecordKeys('stays-old')).length, 2, 'a record for main and one for HEAD');
    const ls = lsRemote(await direct.ok(direct.dir(), 'ls-remote', 'knotless://alice.test/stays-old'));
    assert.equal(ls.get('refs/heads/main'), tip);
  });
});

describe('what a 1,000-ref mirror push costs (performance.md)', () => {
  /** A repository with one commit on main, then 1,000 tags pushed with --mirror; returns that push's cost. */
  async function mirrorPush(name: string, tabled: boolean) {
    assert.equal((await direct.knotless('repo', 'create', name)).code, 0);
    const dir = await newRepo(direct, `knotless://alice.test/${name}`);
    const tip = await commitFiles(direct, dir, { 'a.txt': 'a\n' }, 'first');
    await direct.ok(dir, 'push', '-q', 'origin', 'main');
    if (tabled) await migrate(name, (...args) => knotless(args, { env: direct.env }));
    const lines = Array.from({ length: 1000 }, (_, i) => `${tip} refs/tags/t${String(i).padStart(4, '0')}`);
    fs.writeFileSync(path.join(dir, '.git', 'packed-refs'), lines.join('\n') + '\n');
    proxy!.reset();
    const res = await runProcess('git', ['push', '-q', '--mirror', 'origin'], {
      env: { ...direct.env, ...OLD, KNOTLESS_SERVICE: proxy!.url },
      cwd: dir,
    });
    assert.equal(res.code, 0, res.stderr);
    const writes = proxy!.requests.filter((r) => r.points > 0);
    return {
      requests: proxy!.requests.length,
      writeRequests: writes.length,
      points: writes.reduce((n, r) => n + r.points, 0),
    };
  }

  it('is one putRecord of the table (2 points) against 3,003 points of ref records', async (tc) => {
    // 1,001 refs: the 1,000 tags and refs/remotes/origin/main, which the first push made and --mirror pushes.
    const records = await mirrorPush('mirror-records', false);
    const table = await mirrorPush('mirror-table', true);
    tc.diagnostic(`ref records: ${JSON.stringify(records)}`);
    tc.diagnostic(`ref table: ${JSON.stringify(table)}`);
    assert.deepEqual({ w: records.writeRequests, p: records.points }, { w: 6, p: 3003 });
    assert.deepEqual({ w: table.writeRequests, p: table.points }, { w: 1, p: 2 });
  });
});
