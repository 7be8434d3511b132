// A reader's notifications in the appview's index, without a network, on SQLite and on PostgreSQL:
// rows that do not concern the reader, or whose page does not open for them (an issue naming their
// private repository, or one the appview does not know; a comment naming `@bob.testing`, which
// contains `@bob.test`), are left out before the limit of 50, so however many of them come after
// the reader's real notifications, those are still shown, rows sharing a time among them; an index
// made before mentions were indexed finds them when it is opened.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Index } from '../src/db/index-store.ts';
import { openDatabase } from '../src/db/open.ts';
import { Notifications } from '../src/db/notifications.ts';
import { applyWrite, type RecordWrite } from '../src/ingest/apply.ts';
import { startPostgres, type PgServer } from './postgres.ts';

const ALICE = 'did:plc:alice';
const BOB = 'did:plc:bob';
const CAROL = 'did:plc:carol';
const ISSUE = 'dev.knotless.issue';
const COMMENT = 'dev.knotless.comment';

/** A record key as a TID would be, in the order written. */
const key = (prefix: string, n: number) => `3k${prefix}${String(n).padStart(9, '0')}`;
/** A time `n` minutes into the day: the floods come after the real notifications. */
const at = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, n)).toISOString();

const issue = (repo: string, title: string, createdAt: string) => ({ repo, title, createdAt });
const comment = (subject: string, body: string, createdAt: string) => ({ subject, body, createdAt });

function engine(name: string, database: (purpose: string) => Promise<string>) {
  describe(`notifications in the index (${name})`, () => {
    let index: Index;
    let rev = 0;
    const write = async (did: string, collection: string, rkey: string, record: object) => {
      const w: RecordWrite = {
        did,
        collection,
        rkey,
        rev: `3rev${String(++rev).padStart(8, '0')}`,
        cid: `bafyreic${rkey}`,
        record: { $type: collection, ...record },
        time: new Date().toISOString(),
      };
      await applyWrite(index, w);
    };
    const list = async () =>
      (await new Notifications(index.db).list(BOB, 'bob.test')).map((n) => [
        n.kind,
        n.did,
        n.item.repoName,
        n.item.rkey,
        n.detail,
      ]);

    before(async () => {
      const { db, engine } = await openDatabase(await database('notifications'));
      index = new Index(db, engine);
      for (const [did, handle] of [
        [ALICE, 'alice.test'],
        [BOB, 'bob.test'],
        [CAROL, 'carol.test'],
      ] as const)
        await index.putOwner(did, handle, 'http://pds.invalid');
      await write(ALICE, 'dev.knotless.repo', 'site', { createdAt: at(0) });
      await write(BOB, 'dev.knotless.repo', 'site', { createdAt: at(0) });
      await write(BOB, 'dev.knotless.repo', 'secret', {
        createdAt: at(0),
        private: { recipients: [], wrapped: [] },
      });
      // alice's issue, on which carol mentions bob, and others.
      await write(ALICE, ISSUE, key('a', 0), issue(`at://${ALICE}/dev.knotless.repo/site`, 'A bug', at(1)));
    });
    after(async () => {
      await index?.close();
    });

    it('shows the real ones when 120 rows that are not for the reader came after them', async () => {
      // The real ones: carol opens an issue on bob's repository and mentions him on alice's.
      await write(CAROL, ISSUE, key('c', 0), issue(`at://${BOB}/dev.knotless.repo/site`, 'Real', at(2)));
      const aliceIssue = `at://${ALICE}/${ISSUE}/${key('a', 0)}`;
      await write(CAROL, COMMENT, key('m', 0), comment(aliceIssue, 'cc @bob.test', at(3)));
      // Then the flood, all at one time: issues naming bob's private repository and one the
      // appview does not know, and comments naming a longer handle.
      for (let i = 1; i <= 30; i++) {
        await write(
          CAROL,
          ISSUE,
          key('p', i),
          issue(`at://${BOB}/dev.knotless.repo/secret`, 'Hidden', at(10)),
        );
        await write(
          CAROL,
          ISSUE,
          key('u', i),
          issue(`at://${BOB}/dev.knotless.repo/ghost`, 'Unknown', at(10)),
        );
      }
      for (let i = 1; i <= 60; i++)
        await write(CAROL, COMMENT, key('m', i), comment(aliceIssue, 'cc @bob.testing', at(10)));
      assert.deepEqual(await list(), [
        ['mention', CAROL, 'site', key('a', 0), 'cc @bob.test'],
        ['issue', CAROL, 'site', key('c', 0), ''],
      ]);
    });

    it('pages on from the last row read, by time and key: none read twice or skipped, the 50 newest real ones shown', async () => {
      // 70 real mentions at the flood's time, every key below the look-alikes': the first page is
      // all look-alikes, the second ends them and begins these, the third is these only.
      const aliceIssue = `at://${ALICE}/${ISSUE}/${key('a', 0)}`;
      for (let i = 1; i <= 70; i++)
        await write(CAROL, COMMENT, key('l', i), comment(aliceIssue, `@bob.test ${i}`, at(10)));
      const shown = await list();
      assert.deepEqual(
        shown.map((n) => n[4]),
        Array.from({ length: 50 }, (_, i) => `@bob.test ${70 - i}`),
      );
      assert.ok(shown.every((n) => n[0] === 'mention' && n[3] === key('a', 0)));
    });

    it('shows a real mention however many look-alikes came after it (1,100 here)', async () => {
      // carol names bob in a comment on alice's issue; then dave floods the same source with
      // comments naming handles that contain bob's, all newer than every real notification, and a
      // few issues that do the same.
      const DAVE = 'did:plc:dave';
      await index.putOwner(DAVE, 'dave.test', 'http://pds.invalid');
      const aliceIssue = `at://${ALICE}/${ISSUE}/${key('a', 0)}`;
      await write(CAROL, COMMENT, key('r', 0), comment(aliceIssue, 'what does @BOB.test think?', at(20)));
      const looks = ['@bob.testing', '@bob.test.example', 'x@bob.test', '@bob.test-2'];
      for (let i = 1; i <= 1100; i++)
        await write(DAVE, COMMENT, key('f', i), comment(aliceIssue, looks[i % 4]!, at(30)));
      for (let i = 1; i <= 20; i++)
        await write(DAVE, ISSUE, key('g', i), {
          ...issue(`at://${ALICE}/dev.knotless.repo/site`, 'Look-alike', at(30)),
          body: looks[i % 4]!,
        });
      const shown = await list();
      assert.deepEqual(shown[0], ['mention', CAROL, 'site', key('a', 0), 'what does @BOB.test think?']);
      assert.ok(shown.every((n) => n[1] !== DAVE));
    });

    it('follows a text edited: a mention taken out is gone, one put in is shown', async () => {
      const aliceIssue = `at://${ALICE}/${ISSUE}/${key('a', 0)}`;
      await write(CAROL, COMMENT, key('e', 1), comment(aliceIssue, 'ping @bob.test', at(40)));
      await write(CAROL, COMMENT, key('e', 2), comment(aliceIssue, 'ping @bob.testing', at(41)));
      const details = async () => (await list()).filter((n) => n[1] === CAROL).map((n) => n[4]);
      assert.ok((await details()).includes('ping @bob.test'));
      assert.ok(!(await details()).includes('ping @bob.testing'));
      await write(CAROL, COMMENT, key('e', 1), comment(aliceIssue, 'never mind', at(40)));
      await write(CAROL, COMMENT, key('e', 2), comment(aliceIssue, 'ping @bob.test, sorry', at(41)));
      assert.ok(!(await details()).includes('never mind'));
      assert.ok((await details()).includes('ping @bob.test, sorry'));
    });
  });

  describe(`an index made before mentions were indexed (${name})`, () => {
    it('finds the mentions of the texts it already held when it is opened', async () => {
      const conn = await database('before-mentions');
      let rev = 0;
      const fill = async (index: Index) => {
        for (const [did, handle] of [
          [ALICE, 'alice.test'],
          [BOB, 'bob.test'],
          [CAROL, 'carol.test'],
        ] as const)
          await index.putOwner(did, handle, 'http://pds.invalid');
        const w = async (did: string, collection: string, rkey: string, record: object) =>
          applyWrite(index, {
            did,
            collection,
            rkey,
            rev: `3rev${String(++rev).padStart(8, '0')}`,
            cid: `bafyreic${rkey}`,
            record: { $type: collection, ...record },
            time: new Date().toISOString(),
          });
        await w(ALICE, 'dev.knotless.repo', 'site', { createdAt: at(0) });
        await w(ALICE, ISSUE, key('a', 0), issue(`at://${ALICE}/dev.knotless.repo/site`, 'A bug', at(1)));
        // More rows than one page of the migration's backfill reads.
        for (let i = 1; i <= 600; i++)
          await w(
            CAROL,
            COMMENT,
            key('b', i),
            comment(`at://${ALICE}/${ISSUE}/${key('a', 0)}`, `@bob.test ${i}`, at(2)),
          );
        await w(CAROL, ISSUE, key('b', 0), {
          ...issue(`at://${ALICE}/dev.knotless.repo/site`, 'Asks', at(3)),
          body: 'and @bob.test?',
        });
      };
      const first = await openDatabase(conn);
      const index = new Index(first.db, first.engine);
      await fill(index);
      // Back to how the index was before: no mentions table, its migration not applied, nor any
      // migration after it (the maintainers' table and the pushes' pusher column, the owners' verified
      // revision).
      await first.db.schema.dropTable('mentions').execute();
      await first.db.schema.dropTable('repo_maintainers').execute();
      await first.db.schema.alterTable('pushes').dropColumn('pusher').execute();
      for (const column of ['verified_rev', 'verified_at', 'verified_key', 'verified_pds'])
        await first.db.schema.alterTable('owners').dropColumn(column).execute();
      await first.db
        .deleteFrom('kysely_migration' as 'mentions')
        .where('name' as 'tab', 'in', ['0012_mentions', '0013_maintainers', '0014_verified_rev'])
        .execute();
      await index.close();
      const again = await openDatabase(conn);
      const reopened = new Index(again.db, again.engine);
      try {
        const shown = await new Notifications(again.db).list(BOB, 'bob.test');
        assert.equal(shown.length, 50);
        assert.equal(shown[0]!.kind, 'mention');
        assert.equal(shown[0]!.item.rkey, key('b', 0));
        assert.ok(shown.slice(1).every((n) => n.kind === 'mention' && n.detail.startsWith('@bob.test ')));
      } finally {
        await reopened.close();
      }
    });
  });
}

let pg: PgServer | undefined;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-notifications-'));
engine('SQLite', (purpose) =>
  Promise.resolve(purpose === 'notifications' ? ':memory:' : path.join(dir, `${purpose}.sqlite`)),
);
engine('PostgreSQL', async (purpose) => {
  pg ??= await startPostgres();
  return pg.createDatabase(purpose);
});
after(async () => {
  await pg?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});
