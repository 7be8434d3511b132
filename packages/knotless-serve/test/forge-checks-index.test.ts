// Checks and protections in the appview's index, without a network, on SQLite and on PostgreSQL:
// each runner's latest verdict per context is the one row kept however often it re-runs (10,000
// checks on one commit), a context with control characters is refused by the core's reader, only
// the owner's protection counts, and a flood of checks by runners the owner does not trust never
// crowds out the ones a merge is judged by; the author's notifications name only failures that count.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Index } from '../src/db/index-store.ts';
import { openDatabase } from '../src/db/open.ts';
import { Notifications } from '../src/db/notifications.ts';
import { applyWrite, type RecordWrite } from '../src/ingest/apply.ts';
import { UNTRUSTED_COUNTED } from 'knotless-core/forge/checks';
import { indexedVerdict } from '../src/web/checks.ts';
import { checksBadge, checksList } from '../src/web/pages/checks-view.ts';
import type { RepoTarget, Site } from '../src/web/site.ts';
import { startPostgres, type PgServer } from './postgres.ts';

const OWNER = 'did:plc:owner';
const RUNNER = 'did:plc:runner';
const STRANGER = 'did:plc:stranger';
const AUTHOR = 'did:plc:author';
const REPO = `at://${OWNER}/dev.knotless.repo/site`;
const COMMIT = 'c'.repeat(40);
const TARGET = { did: OWNER, owner: 'owner.test', name: 'site' } as unknown as RepoTarget;
const CHECK = 'dev.knotless.check';
const PROTECTION = 'dev.knotless.protection';

/** A record key as a TID would be: ordered as the runner wrote them. */
const key = (n: number) => `3k${String(n).padStart(11, '0')}`;

function engine(name: string, database: () => Promise<string>, flood: number) {
  describe(`checks in the index (${name})`, () => {
    let index: Index;
    let rev = 0;
    const lines: string[] = [];
    const write = async (did: string, collection: string, rkey: string, record: object | null) => {
      const w: RecordWrite = {
        did,
        collection,
        rkey,
        rev: `3rev${String(++rev).padStart(8, '0')}`,
        cid: record === null ? null : `bafyreic${rkey}`,
        record: record === null ? null : { $type: collection, ...record },
        time: new Date().toISOString(),
      };
      await applyWrite(index, w, undefined, (l) => lines.push(l));
    };
    const check = (context: string, state: string, commit = COMMIT) => ({
      repo: REPO,
      commit,
      context,
      state,
      createdAt: new Date().toISOString(),
    });
    const rows = async () =>
      index.db.selectFrom('checks').selectAll().where('deleted', '=', 0).orderBy('rkey').execute();
    // indexedVerdict reads only the index; the rest of a site is not needed.
    const verdict = (branch?: string) =>
      indexedVerdict({ index } as unknown as Site, { did: OWNER, name: 'site' }, COMMIT, branch);

    before(async () => {
      const { db, engine } = await openDatabase(await database());
      index = new Index(db, engine);
    });
    after(async () => {
      await index?.close();
    });

    it(`keeps one row of a runner re-running one check ${flood} times: its latest, by record key`, async () => {
      for (let i = 1; i <= flood; i++)
        await write(RUNNER, CHECK, key(i), check('test', i % 2 ? 'failure' : 'pending'));
      await write(RUNNER, CHECK, key(flood + 1), check('test', 'success'));
      // An older key arriving late (a backfill, a replay) replaces nothing.
      await write(RUNNER, CHECK, key(0), check('test', 'failure'));
      const kept = await rows();
      assert.deepEqual(
        kept.map((r) => [r.did, r.rkey, r.context, r.state]),
        [[RUNNER, key(flood + 1), 'test', 'success']],
      );
    });

    it('refuses a context with control characters, logging why, and keeps nothing of it', async () => {
      await write(RUNNER, CHECK, key(flood + 2), check('te\x1b[2Jst', 'success'));
      assert.equal((await rows()).length, 1);
      assert.ok(
        lines.some((l) => l.includes(`${CHECK}/${key(flood + 2)}`)),
        lines.join('\n'),
      );
    });

    it("only the owner's protection counts; a stranger's flood of checks never crowds out the trusted one, nor reaches the author's notifications", async () => {
      const protection = (runners: string[]) => ({
        repo: REPO,
        branches: [
          {
            branch: 'main',
            requiredChecks: ['test', 'lint'],
            trustedRunners: runners,
            allowForcePush: false,
            allowDeletion: false,
          },
        ],
        createdAt: new Date().toISOString(),
      });
      // A stranger's record of the same shape, under the same key, protects nothing.
      await write(STRANGER, PROTECTION, 'site', protection([STRANGER]));
      assert.equal((await verdict('main')).required, undefined);
      await write(OWNER, PROTECTION, 'site', protection([RUNNER]));
      for (let i = 0; i < 120; i++)
        await write(STRANGER, CHECK, key(i), check(`ctx-${String(i).padStart(3, '0')}`, 'success'));
      await write(STRANGER, CHECK, key(500), check('lint', 'success'));
      const v = await verdict('main');
      assert.deepEqual(v.required, ['test', 'lint']);
      const trusted = v.shown.filter((c) => c.trusted);
      assert.deepEqual(
        trusted.map((c) => [c.runner, c.context, c.state]),
        [[RUNNER, 'test', 'success']],
      );
      // The others are bounded: at most 50, whatever the stranger writes, and the 71 left out of
      // the stranger's 121 verdicts are counted, on the page and its badge as in the answer.
      assert.equal(v.shown.length - trusted.length, 50);
      assert.deepEqual(v.left, { count: 71, atLeast: false });
      assert.match(
        String(checksList(v)),
        /<li class="check ck-more muted">… and 71 more by runners the owner does not trust<\/li>/,
      );
      assert.match(String(checksBadge(TARGET, COMMIT, v)), /1\/51 checks\s+passed, 71 more untrusted/);
      assert.deepEqual(
        v.unmet.map((u) => u.reason),
        ['lint: no check by a trusted runner yet'],
      );
      // Past UNTRUSTED_COUNTED more, the count stops and says so.
      for (let i = 0; i < UNTRUSTED_COUNTED; i++)
        await write(STRANGER, CHECK, key(1000 + i), check(`more-${String(i).padStart(4, '0')}`, 'failure'));
      const cut = await verdict('main');
      assert.equal(cut.shown.filter((c) => !c.trusted).length, 50);
      assert.deepEqual(cut.left, { count: UNTRUSTED_COUNTED, atLeast: true });
      assert.match(String(checksList(cut)), /… and at least 1000 more by runners the owner does not trust/);
      // A check on another commit is not this commit's.
      await write(RUNNER, CHECK, key(flood + 3), check('lint', 'success', 'd'.repeat(40)));
      assert.equal((await verdict('main')).unmet.length, 1);
      await write(RUNNER, CHECK, key(flood + 4), check('lint', 'failure'));
      assert.deepEqual(
        (await verdict('main')).unmet.map((u) => u.reason),
        [`lint: failing (failure by ${RUNNER})`],
      );
      // The pull request's author hears of the trusted runner's failure on their round, not the stranger's
      // (a notice is only of a pull request whose page opens: its repository known, its owner too).
      await index.putOwner(OWNER, 'owner.test', null);
      await write(OWNER, 'dev.knotless.repo', 'site', { createdAt: new Date().toISOString() });
      await write(AUTHOR, 'dev.knotless.pull', '3pull', {
        repo: REPO,
        base: 'main',
        head: { repo: REPO, branch: 'feature' },
        title: 'A change',
        rounds: [
          {
            head: COMMIT,
            base: 'b'.repeat(40),
            pack: {
              $type: 'blob',
              ref: { $link: 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy' },
              mimeType: 'application/x-git-packed-objects',
              size: 100,
            },
            createdAt: new Date().toISOString(),
          },
        ],
        createdAt: new Date().toISOString(),
      });
      await write(STRANGER, CHECK, key(501), check('test', 'failure'));
      const told = await new Notifications(index.db).list(AUTHOR, 'author.test');
      assert.deepEqual(
        told.filter((n) => n.kind === 'check').map((n) => [n.did, n.detail, n.item.rkey]),
        [[RUNNER, 'lint', '3pull']],
      );
      // The owner lifts the protection: nothing is required.
      await write(OWNER, PROTECTION, 'site', null);
      assert.deepEqual((await verdict('main')).unmet, []);
    });
  });
}

let pg: PgServer | undefined;
engine('SQLite', () => Promise.resolve(':memory:'), 10_000);
engine(
  'PostgreSQL',
  async () => {
    pg = await startPostgres();
    return pg.createDatabase('checks');
  },
  1_000,
);
after(async () => {
  await pg?.stop();
});
