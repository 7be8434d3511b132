// The forge's index without a network: the authority rule case by case, the order
// records arrive in (a status before its pull request, a stale revision after a newer one), deletes,
// and replays, on the same ForgeStore both engines use (SQLite in memory here; forge.test.ts runs
// PostgreSQL through a backfill).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Index } from '../src/db/index-store.ts';
import { openDatabase } from '../src/db/open.ts';
import { applyWrite, type RecordWrite } from '../src/ingest/apply.ts';

const OWNER = 'did:plc:owner';
const AUTHOR = 'did:plc:author';
const OTHER = 'did:plc:other';
const REPO = `at://${OWNER}/dev.knotless.repo/site`;
const PULL = `at://${AUTHOR}/dev.knotless.pull/3pull`;
const ISSUE = `at://${AUTHOR}/dev.knotless.issue/3issue`;
const HEX = 'a'.repeat(40);

let index: Index;
let rev = 0;
const lines: string[] = [];

/** A write as the stream would give it, at the next revision unless one is given. */
async function write(
  did: string,
  collection: string,
  rkey: string,
  record: object | null,
  r?: string,
): Promise<void> {
  const w: RecordWrite = {
    did,
    collection,
    rkey,
    rev: r ?? `3rev${String(++rev).padStart(6, '0')}`,
    cid: record === null ? null : `bafyreic${rkey}`,
    record: record === null ? null : { $type: collection, ...record },
    time: new Date().toISOString(),
  };
  await applyWrite(index, w, undefined, (l) => lines.push(l));
}

const FUTURE = '2099-01-01T00:00:00.000Z';
const PAST = '1970-01-01T00:00:00.000Z';
const t = (n: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString();
const pull = {
  repo: REPO,
  base: 'main',
  head: { repo: REPO, branch: 'feature' },
  title: 'A change',
  rounds: [
    {
      head: HEX,
      base: 'b'.repeat(40),
      pack: {
        $type: 'blob',
        ref: { $link: 'bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy' },
        mimeType: 'application/x-git-packed-objects',
        size: 100,
      },
      createdAt: t(0),
    },
  ],
  createdAt: t(0),
};
const status = (s: string, n: number, extra: object = {}) => ({
  pull: PULL,
  status: s,
  createdAt: t(n),
  ...extra,
});
const state = async () => {
  const p = await index.forge.pull(AUTHOR, '3pull');
  return p === undefined ? undefined : [p.state, p.merged, JSON.parse(p.labels) as string[]];
};

describe('the forge index: authority, order, deletes and replays', () => {
  before(async () => {
    const { db, engine } = await openDatabase(':memory:');
    index = new Index(db, engine);
  });
  after(async () => {
    await index.close();
  });

  it('a status that arrives before its pull request counts once the pull request does', async () => {
    await write(OWNER, 'dev.knotless.pull.status', '3s1', status('closed', 5, { labels: ['wontfix'] }));
    assert.equal(await state(), undefined);
    await write(AUTHOR, 'dev.knotless.pull', '3pull', pull);
    assert.deepEqual(await state(), ['closed', null, ['wontfix']]);
  });

  it("the author cannot undo the owner's close, whatever date they write; nor can anyone else", async () => {
    await write(AUTHOR, 'dev.knotless.pull.status', '3s2', status('open', 6));
    assert.deepEqual(await state(), ['closed', null, ['wontfix']]);
    await write(AUTHOR, 'dev.knotless.pull.status', '3s3', { ...status('open', 0), createdAt: FUTURE });
    assert.deepEqual(await state(), ['closed', null, ['wontfix']]);
    await write(OTHER, 'dev.knotless.pull.status', '3s3', status('open', 7, { labels: ['spam'] }));
    await write(AUTHOR, 'dev.knotless.pull.status', '3s4', status('merged', 8, { merged: HEX }));
    assert.deepEqual(await state(), ['closed', null, ['wontfix']]);
    // The owner reopening after their own close counts, even dated before it.
    await write(OWNER, 'dev.knotless.pull.status', '3s40', { ...status('open', 0), createdAt: PAST });
    assert.deepEqual(await state(), ['open', null, []]);
    await write(OWNER, 'dev.knotless.pull.status', '3s40', null);
  });

  it("orders one account's records by key, never by createdAt; the owner's merge is final", async () => {
    await write(OWNER, 'dev.knotless.pull.status', '3s6', status('merged', 10, { merged: HEX, labels: [] }));
    assert.deepEqual(await state(), ['merged', HEX, []]);
    // A later date under an earlier key is not a later decision.
    await write(OWNER, 'dev.knotless.pull.status', '3s5', { ...status('closed', 0), createdAt: FUTURE });
    assert.deepEqual(await state(), ['merged', HEX, []]);
    // Once the owner merged it, the author's "open" or "closed", at any date, changes nothing.
    await write(AUTHOR, 'dev.knotless.pull.status', '3s8', { ...status('open', 0), createdAt: FUTURE });
    await write(AUTHOR, 'dev.knotless.pull.status', '3s9', status('closed', 12));
    assert.deepEqual(await state(), ['merged', HEX, []]);
    await write(AUTHOR, 'dev.knotless.pull.status', '3s8', null);
    await write(AUTHOR, 'dev.knotless.pull.status', '3s9', null);
  });

  it('deleting the winning status falls back to the next; a stale revision never overwrites', async () => {
    await write(OWNER, 'dev.knotless.pull.status', '3s6', null);
    assert.deepEqual(await state(), ['closed', null, []]);
    // The create of 3s6 again, at its old revision (a replay): the tombstone is newer and stays.
    await write(
      OWNER,
      'dev.knotless.pull.status',
      '3s6',
      status('merged', 10, { merged: HEX }),
      '3rev000001',
    );
    assert.deepEqual(await state(), ['closed', null, []]);
  });

  it('the pull request edited to a new round keeps its state; deleted, it leaves the lists', async () => {
    await write(AUTHOR, 'dev.knotless.pull', '3pull', {
      ...pull,
      rounds: [...pull.rounds, { ...pull.rounds[0], head: 'c'.repeat(40) }],
    });
    const p = await index.forge.pull(AUTHOR, '3pull');
    assert.equal((JSON.parse(p!.rounds) as unknown[]).length, 2);
    assert.deepEqual(await state(), ['closed', null, []]);
    assert.deepEqual((await index.forge.counts(OWNER, 'site')).pulls, { open: 0, closed: 1, merged: 0 });
    await write(AUTHOR, 'dev.knotless.pull', '3pull', null);
    assert.equal(await state(), undefined);
    assert.deepEqual(await index.forge.pulls(OWNER, 'site', 'all', 10), []);
  });

  it("issues: the owner's close stands against the author's reopen, the author's withdrawal against the owner's", async () => {
    await write(AUTHOR, 'dev.knotless.issue', '3issue', { repo: REPO, title: 'Broken', createdAt: t(0) });
    const issueState = async () => {
      const row = await index.forge.issue(AUTHOR, '3issue');
      return [row?.state, JSON.parse(row?.labels ?? '[]') as string[]];
    };
    const decision = (s: string, createdAt: string, extra: object = {}) => ({
      issue: ISSUE,
      state: s,
      createdAt,
      ...extra,
    });
    assert.deepEqual(await issueState(), ['open', []]);
    await write(OTHER, 'dev.knotless.issue.state', '3i1', decision('closed', t(1)));
    assert.deepEqual(await issueState(), ['open', []]);
    await write(AUTHOR, 'dev.knotless.issue.state', '3i2', decision('closed', t(2)));
    assert.deepEqual(await issueState(), ['closed', []]);
    // The owner's reopen, dated after, does not undo the author's withdrawal; its labels count.
    await write(OWNER, 'dev.knotless.issue.state', '3i3', decision('open', FUTURE, { labels: ['bug'] }));
    assert.deepEqual(await issueState(), ['closed', ['bug']]);
    await write(AUTHOR, 'dev.knotless.issue.state', '3i4', decision('open', PAST));
    assert.deepEqual(await issueState(), ['open', ['bug']]);
    await write(OWNER, 'dev.knotless.issue.state', '3i5', decision('closed', PAST));
    for (const [key, when] of [
      ['3i6', FUTURE],
      ['3i7', PAST],
    ] as const) {
      await write(AUTHOR, 'dev.knotless.issue.state', key, decision('open', when));
      assert.deepEqual(await issueState(), ['closed', []]);
    }
  });

  it('a state record edited to name another item leaves its old one: both are worked out again', async () => {
    const states = async () => [
      (await index.forge.pull(AUTHOR, '3pa'))?.state,
      (await index.forge.pull(AUTHOR, '3pb'))?.state,
      (await index.forge.issue(AUTHOR, '3ia'))?.state,
      (await index.forge.issue(AUTHOR, '3ib'))?.state,
    ];
    const named = (collection: string, rkey: string) => `at://${AUTHOR}/${collection}/${rkey}`;
    for (const rkey of ['3pa', '3pb']) await write(AUTHOR, 'dev.knotless.pull', rkey, pull);
    for (const rkey of ['3ia', '3ib'])
      await write(AUTHOR, 'dev.knotless.issue', rkey, { repo: REPO, title: 'Two', createdAt: t(0) });
    const closing = (target: string) => ({
      pull: { pull: named('dev.knotless.pull', `3p${target}`), status: 'closed', createdAt: t(20) },
      issue: { issue: named('dev.knotless.issue', `3i${target}`), state: 'closed', createdAt: t(20) },
    });
    await write(OWNER, 'dev.knotless.pull.status', '3m1', closing('a').pull);
    await write(OWNER, 'dev.knotless.issue.state', '3m2', closing('a').issue);
    assert.deepEqual(await states(), ['closed', 'open', 'closed', 'open']);
    await write(OWNER, 'dev.knotless.pull.status', '3m1', closing('b').pull);
    await write(OWNER, 'dev.knotless.issue.state', '3m2', closing('b').issue);
    assert.deepEqual(await states(), ['open', 'closed', 'open', 'closed']);
    await write(OWNER, 'dev.knotless.pull.status', '3m1', null);
    await write(OWNER, 'dev.knotless.issue.state', '3m2', null);
    assert.deepEqual(await states(), ['open', 'open', 'open', 'open']);
  });

  it('a record that fails validation is skipped and logged, and replaces nothing with half of itself', async () => {
    await write(AUTHOR, 'dev.knotless.issue', '3issue', { repo: REPO, title: '', createdAt: t(0) });
    assert.ok(
      lines.some((l) => l.startsWith(`skipping ${ISSUE}: `)),
      lines.join('\n'),
    );
    // An invalid version counts as absent, as a deleted one does.
    assert.equal(await index.forge.issue(AUTHOR, '3issue'), undefined);
  });
  it('an account that is not active counts for nothing: its items leave the totals, its state records decide nothing', async () => {
    const [owner, author] = ['did:plc:owner2', 'did:plc:author2'];
    const repo = `at://${owner}/dev.knotless.repo/tool`;
    await index.putOwner(owner, 'owner2.test', 'http://pds.test');
    await index.putOwner(author, 'author2.test', 'http://pds.test');
    await write(author, 'dev.knotless.issue', '3iss', { repo, title: 'Slow', createdAt: t(0) });
    await write(author, 'dev.knotless.pull', '3pr', { ...pull, repo, head: { repo, branch: 'feature' } });
    const closed = { pull: `at://${author}/dev.knotless.pull/3pr`, status: 'closed', createdAt: t(1) };
    await write(owner, 'dev.knotless.pull.status', '3st', closed);
    const totals = (pulls: number[], issues: number[]) => ({
      pulls: { open: pulls[0], closed: pulls[1], merged: 0 },
      issues: { open: issues[0], closed: 0, merged: 0 },
    });
    const prState = async () => (await index.forge.pull(author, '3pr'))?.state;
    assert.deepEqual(await index.forge.counts(owner, 'tool'), totals([0, 1], [1]));
    // The author deactivated: their pull request and issue leave the repository's totals meanwhile.
    await index.accounts.setStatus(author, 'deactivated');
    assert.deepEqual(await index.forge.counts(owner, 'tool'), totals([0, 0], [0]));
    await index.accounts.setStatus(author, null);
    assert.deepEqual(await index.forge.counts(owner, 'tool'), totals([0, 1], [1]));
    // The owner taken down: their close decides nothing meanwhile; active again, it does again.
    await index.accounts.setStatus(owner, 'takendown');
    assert.equal(await prState(), 'open');
    await index.accounts.setStatus(owner, null);
    assert.equal(await prState(), 'closed');
    // The owner deleted: their records are gone, and the pull request is worked out without them.
    await index.accounts.purge(owner);
    assert.equal(await prState(), 'open');
  });
});
