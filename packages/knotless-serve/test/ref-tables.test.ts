// The appview indexes ref tables (`dev.knotless.refs` and `.part`, format.md "The ref table"): on a
// real PDS, tables written straight into the account with the core's own functions (applyRefUpdates,
// layoutRefTable) are seen on the event stream and by a backfill, for both index backends. A
// repository moved from ref records to a table shows the same refs and notes no push for it; a
// table update that moves refs is a push; the old records are ignored from then on; a large table
// is joined from its parts. Hostile: a part that is not the one the table names, a table in another
// account claiming the repository, a table out of order: each leaves the last good refs in place.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jsonToLex } from '@atproto/lexicon';
import { cidForRecord } from '@atproto/repo';
import { runGit } from 'knotless-core';
import { parseRefRecord, type RefRecord } from 'knotless-core/records/ref-record';
import {
  applyRefUpdates,
  joinRefTable,
  layoutRefTable,
  parseRefTable,
  type RefTable,
  type RefUpdate,
  type StoredTable,
} from 'knotless-core/records/ref-table';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { startReceiver } from './webhook-receiver.ts';

const t = useNetwork(['alice.test', 'bob.test']);
// alice pushes to ref records (KNOTLESS_REF_TABLE=0; a new repository starts on its table by
// default): the tables this file writes are made from those records, as a migration makes them.
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_REF_TABLE: '0' }));
let pg: PgServer;
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
});

const TABLE = 'dev.knotless.refs';
const PART = 'dev.knotless.refs.part';

async function session(handle: string): Promise<{ accessJwt: string; did: string }> {
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  return (await res.json()) as { accessJwt: string; did: string };
}

/** Calls a write procedure as `handle`; fails unless the PDS answers 2xx. */
async function write(handle: string, nsid: string, body: Record<string, unknown>): Promise<{ cid?: string }> {
  const s = await session(handle);
  const res = await fetch(`${t.net.pdsUrl}/xrpc/${nsid}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.accessJwt}` },
    body: JSON.stringify({ repo: s.did, ...body }),
  });
  const out = (await res.json()) as { cid?: string };
  assert.equal(res.status, 200, JSON.stringify(out));
  return out;
}

/** Puts a record into `handle`'s account; returns its CID as the PDS computed it. */
async function put(handle: string, collection: string, rkey: string, record: unknown): Promise<string> {
  return (await write(handle, 'com.atproto.repo.putRecord', { collection, rkey, record, validate: false }))
    .cid!;
}

async function cidOf(value: Record<string, unknown>): Promise<string> {
  return (await cidForRecord(jsonToLex(value) as Parameters<typeof cidForRecord>[0])).toString();
}

/** An account's records of one collection, every page. */
async function records(handle: string, collection: string): Promise<{ uri: string; value: unknown }[]> {
  const out: { uri: string; value: unknown }[] = [];
  let cursor: string | undefined;
  do {
    const url = new URL('/xrpc/com.atproto.repo.listRecords', t.net.pdsUrl);
    url.searchParams.set('repo', t.dids[handle]!);
    url.searchParams.set('collection', collection);
    url.searchParams.set('limit', '100');
    if (cursor !== undefined) url.searchParams.set('cursor', cursor);
    const body = (await (await fetch(url)).json()) as { records: typeof out; cursor?: string };
    out.push(...body.records);
    cursor = body.records.length > 0 ? body.cursor : undefined;
  } while (cursor !== undefined);
  return out;
}

/** The repository's ref records as alice's PDS holds them, by ref name, with their keys. */
async function refRecords(name: string): Promise<Map<string, { rkey: string; record: RefRecord }>> {
  const out = new Map<string, { rkey: string; record: RefRecord }>();
  for (const r of await records('alice.test', 'dev.knotless.ref')) {
    const rec = parseRefRecord(r.value);
    if (rec.repo === name) out.set(rec.ref, { rkey: r.uri.split('/').pop()!, record: rec });
  }
  return out;
}

/** What alice's table of `name` holds now, as stored and joined (for a layout that keeps its parts). */
interface Written {
  /** The table record as written. */
  record: Record<string, unknown>;
  table: RefTable;
  stored: StoredTable;
  joined: RefTable;
}

/**
 * Writes alice's table of `name` after `updates`, laid out as the core lays it out (parts first,
 * then the table, then the parts it no longer lists), over `previous` when given.
 */
async function writeTable(
  name: string,
  updates: RefUpdate[],
  previous?: Written,
  head = 'refs/heads/main',
): Promise<Written> {
  const repo = `at://${t.dids['alice.test']!}/dev.knotless.repo/${name}`;
  const table = applyRefUpdates(previous?.joined, updates, { repo, head, maintainer: false }, new Date());
  // applyRefUpdates keeps a table's default branch; an owner changing it sets it on the table.
  table.head = head;
  const writes = await layoutRefTable(
    table,
    name,
    cidOf,
    previous === undefined ? undefined : { table: previous.stored, joined: previous.joined },
  );
  const parts: { rkey: string; cid: string; value: unknown }[] = [];
  for (const part of writes.create) {
    await put('alice.test', PART, part.rkey, part.value);
    parts.push({ rkey: part.rkey, cid: await cidOf(part.value), value: part.value });
  }
  await put('alice.test', TABLE, name, writes.table);
  for (const rkey of writes.remove)
    await write('alice.test', 'com.atproto.repo.deleteRecord', { collection: PART, rkey });
  const stored = parseRefTable(writes.table, repo, true);
  const kept = (previous === undefined ? [] : await partsOf(name)).filter(
    (p) => !parts.some((q) => q.rkey === p.rkey),
  );
  return { record: writes.table, table, stored, joined: joinRefTable(stored, [...parts, ...kept]) };
}

/** alice's parts of `name`'s table as her PDS holds them. */
async function partsOf(name: string): Promise<{ rkey: string; cid: string; value: unknown }[]> {
  const out = [];
  for (const r of await records('alice.test', PART)) {
    const rkey = r.uri.split('/').pop()!;
    if (rkey.startsWith(`${name}~`))
      out.push({ rkey, cid: await cidOf(r.value as Record<string, unknown>), value: r.value });
  }
  return out;
}

interface RepoView {
  refs: { ref: string; target?: string }[];
  defaultBranch?: string;
}

async function indexed(app: Appview, name: string): Promise<{ refs: Record<string, string>; head?: string }> {
  const view = await xrpc<RepoView>(app, 'dev.knotless.getRepo', { actor: 'alice.test', repo: name });
  return {
    refs: Object.fromEntries(view.refs.map((r) => [r.ref, r.target ?? ''])),
    ...(view.defaultBranch === undefined ? {} : { head: view.defaultBranch }),
  };
}

async function mirrored(app: Appview, name: string): Promise<Record<string, string>> {
  const dir = app.mirror.gitDir(t.dids['alice.test']!, name);
  if (!fs.existsSync(dir)) return {};
  const out = await runGit(['for-each-ref', '--format=%(refname) %(objectname)'], { gitDir: dir });
  return Object.fromEntries(
    out.stdout
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ') as [string, string]),
  );
}

/** Waits until the index and the mirror both show exactly `want` (and the default branch `head`). */
async function converged(app: Appview, name: string, want: Record<string, string>, head?: string) {
  const sorted = (o: Record<string, string>) => JSON.stringify(Object.entries(o).sort());
  await waitFor(`${name} to show ${Object.keys(want).length} refs`, async () => {
    const idx = await indexed(app, name);
    if (head !== undefined && idx.head !== head) return undefined;
    return sorted(idx.refs) === sorted(want) && sorted(await mirrored(app, name)) === sorted(want)
      ? true
      : undefined;
  });
}

async function pushesOf(
  app: Appview,
  name: string,
): Promise<{ ref: string; before?: string; after?: string }[]> {
  return (
    await xrpc<{ pushes: { ref: string; before?: string; after?: string }[] }>(
      app,
      'dev.knotless.listPushes',
      {
        actor: 'alice.test',
        repo: name,
        limit: '100',
      },
    )
  ).pushes;
}

/** A repository pushed with ref records: main at the first commit, `second` at the second. */
async function pushed(name: string): Promise<{ first: string; second: string }> {
  const res = await alice.knotless('repo', 'create', name);
  assert.equal(res.code, 0, res.stderr);
  const dir = await newRepo(alice, `knotless://alice.test/${name}`);
  const first = await commitFiles(alice, dir, { 'a.txt': 'first\n' }, 'first');
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  const second = await commitFiles(alice, dir, { 'a.txt': 'second\n' }, 'second');
  await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:refs/heads/second');
  return { first, second };
}

/** The problem the index recorded for alice's table of `name`, once it has one. */
function problemOf(app: Appview, name: string): Promise<string> {
  return waitFor(`a problem with ${name}'s table`, () =>
    app.index.refTableProblem(t.dids['alice.test']!, name),
  );
}

function backendSuite(backend: 'sqlite' | 'postgres'): void {
  describe(`appview indexing ref tables (${backend})`, () => {
    let app: Appview;
    let dataDir: string;
    const name = (s: string) => `${s}-${backend}`;

    before(async () => {
      await t.ready;
      dataDir = t.tmpdir();
      const database =
        backend === 'sqlite' ? path.join(dataDir, 'index.sqlite') : await pg.createDatabase(`kt_${backend}`);
      app = await appviewOn(t, database, dataDir);
    });
    after(async () => {
      await app?.close();
    });

    it('moves a repository from ref records to a table, then follows the table alone', async () => {
      const repo = name('moved');
      const { first, second } = await pushed(repo);
      await converged(app, repo, { 'refs/heads/main': first, 'refs/heads/second': second });
      const pushesBefore = (await pushesOf(app, repo)).length;
      const recs = await refRecords(repo);
      const packsOf = (ref: string) => recs.get(ref)!.record.packs;

      // The table holding the same refs and HEAD: the same repository, and no push.
      const written = await writeTable(repo, [
        { ref: 'refs/heads/main', target: first, packs: packsOf('refs/heads/main') },
        { ref: 'refs/heads/second', target: second, packs: packsOf('refs/heads/second') },
      ]);
      await waitFor('the table to be indexed', async () =>
        (await app.index.db
          .selectFrom('ref_tables')
          .select('rkey')
          .where('did', '=', t.dids['alice.test']!)
          .where('rkey', '=', repo)
          .executeTakeFirst()) === undefined
          ? undefined
          : true,
      );
      await converged(
        app,
        repo,
        { 'refs/heads/main': first, 'refs/heads/second': second },
        'refs/heads/main',
      );
      assert.equal((await pushesOf(app, repo)).length, pushesBefore);

      // The old records deleted, as a migration does: nothing moves.
      for (const { rkey } of recs.values())
        await write('alice.test', 'com.atproto.repo.deleteRecord', { collection: 'dev.knotless.ref', rkey });
      // A ref record an old client writes afterwards is ignored: the table alone gives the refs.
      await put('alice.test', 'dev.knotless.ref', `${repo}~refs~heads~stale`, {
        ...recs.get('refs/heads/main')!.record,
        $type: 'dev.knotless.ref',
        ref: 'refs/heads/stale',
        packs: [],
      });

      // A table update that moves refs is a push: main forward, a branch created, one deleted,
      // and the default branch changed. The repository's webhook is told of each ref that moved.
      const rx = await startReceiver();
      after(() => rx.close());
      await app.index.webhooks.add(t.dids['alice.test']!, repo, rx.url);
      await writeTable(
        repo,
        [
          { ref: 'refs/heads/main', target: second, packs: packsOf('refs/heads/second') },
          { ref: 'refs/heads/topic', target: first, packs: packsOf('refs/heads/main') },
          { ref: 'refs/heads/second' },
        ],
        written,
        'refs/heads/topic',
      );
      await converged(
        app,
        repo,
        { 'refs/heads/main': second, 'refs/heads/topic': first },
        'refs/heads/topic',
      );
      const pushes = await pushesOf(app, repo);
      assert.equal(pushes.length, pushesBefore + 3, JSON.stringify(pushes));
      assert.deepEqual(
        pushes
          .slice(0, 3)
          .map((p) => [p.ref, p.before ?? null, p.after ?? null])
          .sort(),
        [
          ['refs/heads/main', first, second],
          ['refs/heads/second', second, null],
          ['refs/heads/topic', null, first],
        ],
      );
      const events = await waitFor('three push events', () => {
        const got = rx.received.filter((r) => r.headers['x-knotless-event'] === 'push');
        return Promise.resolve(got.length >= 3 ? got : undefined);
      });
      assert.deepEqual(
        events
          .map((e) => JSON.parse(e.body) as { ref: string; before: string | null; after: string | null })
          .map((e) => [e.ref, e.before, e.after])
          .sort(),
        [
          ['refs/heads/main', first, second],
          ['refs/heads/second', second, null],
          ['refs/heads/topic', null, first],
        ],
      );
      // The pages are built on the same refs: the branch list and a commit page.
      const branches = await get(`${app.url}/alice.test/${repo}/branches`);
      assert.equal(branches.status, 200);
      assert.match(branches.text, />topic</);
      assert.doesNotMatch(branches.text, />stale</);
      assert.equal((await get(`${app.url}/alice.test/${repo}/commit/${second}`)).status, 200);
      const listed = await xrpc<{ refs: { ref: string; symref?: string }[] }>(app, 'dev.knotless.listRefs', {
        actor: 'alice.test',
        repo,
      });
      assert.deepEqual(
        listed.refs.map((r) => r.ref),
        ['HEAD', 'refs/heads/main', 'refs/heads/topic'],
      );

      // A fresh appview reads the same from the account's records (a backfill, not the stream).
      const other = await appviewOn(t, path.join(t.tmpdir(), 'backfill.sqlite'), undefined, {
        firehoses: [],
        backfillDids: [t.dids['alice.test']!],
      });
      try {
        await converged(
          other,
          repo,
          { 'refs/heads/main': second, 'refs/heads/topic': first },
          'refs/heads/topic',
        );
      } finally {
        await other.close();
      }

      // The table deleted (the repository deleted): its refs are gone with it.
      await write('alice.test', 'com.atproto.repo.deleteRecord', { collection: TABLE, rkey: repo });
      await waitFor('the refs to go with the table', async () => {
        const refs = await app.index.refs(t.dids['alice.test']!, repo);
        // Only the ignored record written after the move is left: it counts again without a table.
        return refs.every((r) => r.ref === 'refs/heads/stale') ? true : undefined;
      });
    });

    it('joins a large table from its parts, and follows an update that keeps them', async () => {
      const repo = name('parted');
      const { first, second } = await pushed(repo);
      const recs = await refRecords(repo);
      const packs = recs.get('refs/heads/main')!.record.packs;
      const tags: RefUpdate[] = Array.from({ length: 3000 }, (_, i) => ({
        ref: `refs/tags/t${String(i).padStart(5, '0')}-${'x'.repeat(40)}`,
        target: first,
        packs,
      }));
      const want: Record<string, string> = Object.fromEntries(tags.map((u) => [u.ref, first]));
      const written = await writeTable(repo, [
        { ref: 'refs/heads/main', target: second, packs: recs.get('refs/heads/second')!.record.packs },
        ...tags,
      ]);
      assert.ok(written.stored.parts.length >= 2, `${written.stored.parts.length} parts`);
      await converged(app, repo, { ...want, 'refs/heads/main': second }, 'refs/heads/main');

      // One tag deleted and one moved: the table keeps its parts, with an override and a gone name.
      const update = await writeTable(
        repo,
        [{ ref: tags[0]!.ref }, { ref: tags[1]!.ref, target: second, packs }],
        written,
      );
      assert.deepEqual(
        update.stored.parts.map((p) => p.rkey),
        written.stored.parts.map((p) => p.rkey),
      );
      assert.deepEqual(update.stored.gone, [tags[0]!.ref]);
      const { [tags[0]!.ref]: _gone, ...rest } = want;
      await converged(app, repo, { ...rest, [tags[1]!.ref]: second, 'refs/heads/main': second });
      const pushes = await pushesOf(app, repo);
      assert.deepEqual(
        pushes
          .slice(0, 2)
          .map((p) => p.ref)
          .sort(),
        [tags[0]!.ref, tags[1]!.ref],
      );
    });

    it('keeps the last good refs when a part is not the one the table names, until it is', async () => {
      const repo = name('swapped');
      const { first, second } = await pushed(repo);
      const recs = await refRecords(repo);
      const packs = recs.get('refs/heads/main')!.record.packs;
      const before = { 'refs/heads/main': first, 'refs/heads/second': second };
      await converged(app, repo, before);
      const tags: RefUpdate[] = Array.from({ length: 3000 }, (_, i) => ({
        ref: `refs/tags/t${String(i).padStart(5, '0')}-${'x'.repeat(40)}`,
        target: second,
        packs,
      }));
      // The layout as the core makes it, but one part stored with other contents under its key.
      const url = `at://${t.dids['alice.test']!}/dev.knotless.repo/${repo}`;
      const table = applyRefUpdates(
        undefined,
        [{ ref: 'refs/heads/main', target: first, packs }, ...tags],
        { repo: url, head: 'refs/heads/main', maintainer: false },
        new Date(),
      );
      const writes = await layoutRefTable(table, repo, cidOf);
      const [bad, ...good] = writes.create;
      for (const p of good) await put('alice.test', PART, p.rkey, p.value);
      const refs = bad!.value['refs'] as { ref: string }[];
      await put('alice.test', PART, bad!.rkey, { ...bad!.value, refs: refs.slice(1) });
      await put('alice.test', TABLE, repo, writes.table);
      assert.match(await problemOf(app, repo), /is not the one the table names \(its CID differs\)/);
      // Not a listing: the refs the repository had before the table are what it shows.
      await app.idle();
      assert.deepEqual((await indexed(app, repo)).refs, before);

      // The part the table names arrives: the table is joined whole.
      await put('alice.test', PART, bad!.rkey, bad!.value);
      await converged(app, repo, {
        'refs/heads/main': first,
        ...Object.fromEntries(tags.map((u) => [u.ref, second])),
      });
      assert.equal(await app.index.refTableProblem(t.dids['alice.test']!, repo), undefined);
    });

    it('refuses a table out of order and a table of the repository in another account', async () => {
      const repo = name('hostile');
      const { first, second } = await pushed(repo);
      const recs = await refRecords(repo);
      const packs = recs.get('refs/heads/main')!.record.packs;
      const written = await writeTable(repo, [
        { ref: 'refs/heads/main', target: first, packs },
        { ref: 'refs/heads/second', target: second, packs: recs.get('refs/heads/second')!.record.packs },
      ]);
      const good = { 'refs/heads/main': first, 'refs/heads/second': second };
      await converged(app, repo, good, 'refs/heads/main');
      const pushesBefore = (await pushesOf(app, repo)).length;

      // Bob writes a table under the repository's key in his own account, naming alice's
      // repository, and one as if he maintained it: neither moves alice's refs.
      const stolen = await layoutRefTable(
        applyRefUpdates(
          written.joined,
          [{ ref: 'refs/heads/main', target: second, packs }],
          { repo: written.joined.repo, maintainer: false },
          new Date(),
        ),
        repo,
        cidOf,
      );
      await put('bob.test', TABLE, repo, stolen.table);
      const { head: _head, maintainers: _m, ...asMaintainer } = stolen.table;
      await put('bob.test', TABLE, `${repo}~${t.dids['alice.test']!}`, asMaintainer);
      const bobs = () =>
        app.index.db
          .selectFrom('ref_tables')
          .select(['rkey', 'owner', 'problem'])
          .where('did', '=', t.dids['bob.test']!)
          .where('repo', '=', repo)
          .orderBy('rkey')
          .execute();
      const rows = await waitFor("bob's tables to be stored", async () => {
        const r = await bobs();
        return r.length === 2 ? r : undefined;
      });
      assert.equal(rows[0]!.owner, 1);
      assert.match(rows[0]!.problem ?? '', /names another repository/);
      assert.equal(rows[1]!.owner, 0);
      assert.equal(rows[1]!.problem, null);

      // Alice's own table with its entries out of order: refused whole, the last good refs kept.
      const unsorted = { ...written.record };
      unsorted['refs'] = [...(unsorted['refs'] as unknown[])].reverse();
      await put('alice.test', TABLE, repo, unsorted);
      assert.match(await problemOf(app, repo), /its refs are not sorted at "refs\/heads\/main"/);
      // The repository's page says its refs are the last read whole, and why.
      const front = await get(`${app.url}/alice.test/${repo}`);
      assert.equal(front.status, 200);
      assert.match(
        front.text,
        /This repository's ref table gives no listing now, so its refs are shown as last read whole/,
      );
      assert.match(front.text, /its refs are not sorted at/);
      await app.idle();
      assert.deepEqual((await indexed(app, repo)).refs, good);
      assert.equal((await pushesOf(app, repo)).length, pushesBefore);
      assert.deepEqual(await mirrored(app, repo), good);
    });
  });
}

backendSuite('sqlite');
backendSuite('postgres');
