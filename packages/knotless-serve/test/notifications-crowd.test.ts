// A reader's notifications in the appview's index, without a network, on SQLite and on PostgreSQL:
// rows that do not concern the reader, or whose page does not open for them (an issue naming their
// private repository, or one the appview does not know; a comment naming `@bob.testing`, which the
// pattern for `@bob.test` also finds), are left out before the limit of 50, so however many of them
// come after the reader's real notifications, those are still shown; the pages read to pass over
// them go on from the last row's key, so rows sharing a time are neither read twice nor skipped.
import assert from 'node:assert/strict';
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

function engine(name: string, database: () => Promise<string>) {
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
    const issue = (repo: string, title: string, createdAt: string) => ({ repo, title, createdAt });
    const comment = (subject: string, body: string, createdAt: string) => ({ subject, body, createdAt });
    const list = async () =>
      (await new Notifications(index.db).list(BOB, 'bob.test')).map((n) => [
        n.kind,
        n.did,
        n.item.repoName,
        n.item.rkey,
        n.detail,
      ]);

    before(async () => {
      const { db, engine } = await openDatabase(await database());
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
  });
}

let pg: PgServer | undefined;
engine('SQLite', () => Promise.resolve(':memory:'));
engine('PostgreSQL', async () => {
  pg = await startPostgres();
  return pg.createDatabase('notifications');
});
after(async () => {
  await pg?.stop();
});
