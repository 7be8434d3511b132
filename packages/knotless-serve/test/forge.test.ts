// The forge, the appview's side: pull requests, issues, state records and comments written straight
// to the PDS by alice, bob and carol (forge-site.ts), followed on the event stream into SQLite, and
// backfilled into a real PostgreSQL server; the XRPC queries' answers exactly as FORGE.md shapes them,
// and the authority rule: only the repository owner's state records count, or an author's own
// open/close; anyone else's are ignored.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Lexicons, type LexiconDoc } from '@atproto/lexicon';
import { runGit } from 'knotless-core';
import { startAppview, type Appview } from '../src/appview.ts';
import { defaultConfig } from '../src/config.ts';
import { at, useForge } from './forge-site.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';

const f = useForge();
/** The records the lexicon refuses, written by one test and looked for in the backfill's log by another. */
const invalid: string[] = [];

interface PullView {
  uri: string;
  author: { did: string; handle?: string };
  state: string;
  merged?: string;
  labels: string[];
  rounds: { head: string; base: string; pack: { cid: string; size: number }; createdAt: string }[];
  [k: string]: unknown;
}
interface IssueView {
  uri: string;
  title: string;
  state: string;
  [k: string]: unknown;
}

const getPull = (app: Appview = f.app) =>
  xrpc<{ pull: PullView; comments: Record<string, unknown>[] }>(app, 'dev.knotless.getPull', {
    uri: f.pull.uri,
  });
const listPulls = (state: string, app: Appview = f.app) =>
  xrpc<{ pulls: PullView[] }>(app, 'dev.knotless.listPulls', { repo: f.repoUri, state });
const listIssues = (state: string | undefined, app: Appview = f.app) =>
  xrpc<{ issues: IssueView[] }>(app, 'dev.knotless.listIssues', {
    repo: f.repoUri,
    ...(state === undefined ? {} : { state }),
  });

/** Waits until the pull request's state is `state`. */
async function pullState(state: string): Promise<PullView> {
  return waitFor(`the pull request ${state}`, async () => {
    const { pull } = await getPull();
    return pull.state === state ? pull : undefined;
  });
}

describe('forge records in the appview', () => {
  let pg: PgServer;
  before(async () => {
    await f.setUp();
    pg = await startPostgres();
  });
  after(async () => {
    await f.app?.close();
    await pg?.stop();
  });

  it("a pull request's newest round is fetched into the target's mirror as its record comes in, before any view", async () => {
    // Round 1's head is on bob's branch only: alice's mirror gets it from the round's pack alone.
    const dir = f.app.mirror.gitDir(f.dids.alice, 'site');
    await waitFor("round 1's head in alice's mirror", async () => {
      const r = await runGit(['cat-file', '-e', `${f.heads[1]}^{commit}`], {
        gitDir: dir,
        okCodes: [1, 128],
      });
      return r.code === 0 ? true : undefined;
    });
  });

  it('getPull: the record, both rounds with their packs, the comments, authors by handle', async () => {
    const { pull, comments } = await getPull();
    const { bob, alice } = f.dids;
    assert.equal(pull.uri, f.pull.uri);
    assert.match(String(pull['cid']), /^bafyrei/);
    assert.deepEqual(pull.author, { did: bob, handle: 'bob.test' });
    assert.equal(pull['repo'], f.repoUri);
    assert.equal(pull['base'], 'main');
    assert.deepEqual(pull['head'], { repo: `at://${bob}/dev.knotless.repo/site`, branch: 'feature' });
    assert.equal(pull['title'], 'Shout <two> & add b');
    assert.match(String(pull['body']), /<script>/, 'kept as written; pages escape it');
    assert.deepEqual(
      pull.rounds.map((r) => [r.head, r.base, r.createdAt]),
      [
        [f.heads[0], f.base, at(10)],
        [f.heads[1], f.base, at(20)],
      ],
    );
    for (const r of pull.rounds) {
      assert.match(r.pack.cid, /^bafkrei/);
      assert.ok(r.pack.size > 32);
    }
    assert.equal(pull['createdAt'], at(10));
    assert.ok(typeof pull['indexedAt'] === 'string');
    assert.deepEqual(pull.labels, []);
    assert.deepEqual(
      comments.map((c) => [
        c['uri'],
        (c['author'] as { handle?: string }).handle,
        c['subject'],
        c['round'],
        c['createdAt'],
      ]),
      [
        [f.comments[0]!.uri, 'alice.test', f.pull.uri, 0, at(15)],
        [f.comments[1]!.uri, 'bob.test', f.pull.uri, 1, at(21)],
      ],
    );
    assert.equal((comments[0]!['author'] as { did: string }).did, alice);
  });

  it('a status forged by carol (closed) or by the author claiming merged is ignored: still open', async () => {
    const { pull } = await getPull();
    assert.equal(pull.state, 'open');
    assert.equal(pull.merged, undefined);
    assert.deepEqual(
      (await listPulls('open')).pulls.map((p) => p.uri),
      [f.pull.uri],
    );
    assert.deepEqual((await listPulls('closed')).pulls, []);
    assert.deepEqual((await listPulls('merged')).pulls, []);
  });

  it('the author may close his own pull request; the owner merges it, with labels', async () => {
    await f.w.bob.create('dev.knotless.pull.status', {
      pull: f.pull.uri,
      status: 'closed',
      createdAt: at(55),
    });
    await pullState('closed');
    assert.deepEqual(
      (await listPulls('closed')).pulls.map((p) => p.uri),
      [f.pull.uri],
    );
    await f.w.alice.create('dev.knotless.pull.status', {
      pull: f.pull.uri,
      status: 'merged',
      merged: f.heads[1],
      labels: ['feature'],
      createdAt: at(60),
    });
    const merged = await pullState('merged');
    assert.equal(merged.merged, f.heads[1]);
    assert.deepEqual(merged.labels, ['feature']);
    assert.deepEqual(
      (await listPulls('merged')).pulls.map((p) => p.uri),
      [f.pull.uri],
    );
    assert.deepEqual((await listPulls('open')).pulls, []);
    assert.equal((await listPulls('all')).pulls.length, 1);
    // carol's later "open" changes nothing, nor the author's, dated after or before the merge.
    await f.w.carol.create('dev.knotless.pull.status', {
      pull: f.pull.uri,
      status: 'open',
      createdAt: at(70),
    });
    for (const createdAt of ['2099-01-01T00:00:00.000Z', '1970-01-01T00:00:00.000Z'])
      await f.w.bob.create('dev.knotless.pull.status', { pull: f.pull.uri, status: 'open', createdAt });
    const sentinel = await f.w.alice.create('dev.knotless.comment', {
      subject: f.pull.uri,
      body: 'Merged, thanks.',
      createdAt: at(71),
    });
    await waitFor('the sentinel comment', async () =>
      (await getPull()).comments.some((c) => c['uri'] === sentinel.uri) ? true : undefined,
    );
    assert.equal((await getPull()).pull.state, 'merged');
  });

  it("issues: open by default, ?state=closed|all, a state forged by carol or the author's future-dated reopen ignored; getIssue with comments", async () => {
    const { bobs, carols } = f.issues;
    assert.deepEqual(
      (await listIssues(undefined)).issues.map((i) => [i.uri, i.state]),
      [[carols.uri, 'open']],
    );
    assert.deepEqual(
      (await listIssues('closed')).issues.map((i) => [i.uri, i.state]),
      [[bobs.uri, 'closed']],
    );
    assert.deepEqual(
      (await listIssues('all')).issues.map((i) => i.title),
      ['Docs typo', 'Crash on start'],
    );
    // Pages: limit and cursor walk the same list.
    const first = await xrpc<{ issues: IssueView[]; cursor?: string }>(f.app, 'dev.knotless.listIssues', {
      repo: f.repoUri,
      state: 'all',
      limit: '1',
    });
    assert.deepEqual([first.issues.map((i) => i.title), first.cursor], [['Docs typo'], '1']);
    const second = await xrpc<{ issues: IssueView[]; cursor?: string }>(f.app, 'dev.knotless.listIssues', {
      repo: f.repoUri,
      state: 'all',
      limit: '1',
      cursor: first.cursor!,
    });
    assert.deepEqual(
      second.issues.map((i) => i.title),
      ['Crash on start'],
    );
    const got = await xrpc<{ issue: IssueView; comments: Record<string, unknown>[] }>(
      f.app,
      'dev.knotless.getIssue',
      {
        uri: bobs.uri,
      },
    );
    assert.equal(got.issue.state, 'closed', "carol's later reopen of bob's issue does not count");
    assert.deepEqual(got.issue['author'], { did: f.dids.bob, handle: 'bob.test' });
    assert.equal(got.issue['body'], 'It <b>crashes</b>.');
    assert.deepEqual(
      got.comments.map((c) => [c['body'], (c['author'] as { handle?: string }).handle]),
      [['Same here.', 'carol.test']],
    );
  });

  it('bad parameters are InvalidRequest; an unknown pull request is PullNotFound', async () => {
    const call = async (nsid: string, params: Record<string, string>) => {
      const res = await fetch(`${f.app.url}/xrpc/${nsid}?${new URLSearchParams(params).toString()}`);
      return [res.status, ((await res.json()) as { error: string }).error];
    };
    assert.deepEqual(await call('dev.knotless.listPulls', { repo: 'alice.test/site' }), [
      400,
      'InvalidRequest',
    ]);
    assert.deepEqual(await call('dev.knotless.listPulls', { repo: f.repoUri, state: 'merged!' }), [
      400,
      'InvalidRequest',
    ]);
    assert.deepEqual(await call('dev.knotless.listIssues', { repo: f.repoUri, state: 'merged' }), [
      400,
      'InvalidRequest',
    ]);
    assert.deepEqual(await call('dev.knotless.getPull', { uri: f.issues.bobs.uri }), [400, 'InvalidRequest']);
    assert.deepEqual(
      await call('dev.knotless.getPull', { uri: `at://${f.dids.bob}/dev.knotless.pull/3zzzzzzzzzzzz` }),
      [400, 'PullNotFound'],
    );
    assert.deepEqual(
      await call('dev.knotless.getIssue', { uri: `at://${f.dids.bob}/dev.knotless.issue/3zzzzzzzzzzzz` }),
      [400, 'IssueNotFound'],
    );
  });

  it('a record its lexicon refuses is skipped whole; a deleted comment disappears', async () => {
    // Valid by the lexicon but not by the contract: a head that is not a hex commit id, and a
    // comment whose subject is a repository; and one the lexicon itself refuses (no title).
    const written = (await f.w.bob.get('dev.knotless.pull', f.pull.rkey)) as {
      rounds: Record<string, unknown>[];
    };
    const bad = await f.w.bob.create('dev.knotless.pull', {
      repo: f.repoUri,
      base: 'main',
      head: { repo: f.repoUri, branch: 'x' },
      title: 'bad round',
      rounds: [{ ...written.rounds[0], head: 'z'.repeat(40) }],
      createdAt: at(80),
    });
    const badBranch = await f.w.bob.create('dev.knotless.pull', {
      repo: f.repoUri,
      base: 'main',
      head: { repo: f.repoUri, branch: 'a..b\u001b[2J' },
      title: 'bad branch',
      rounds: written.rounds,
      createdAt: at(80),
    });
    const stray = await f.w.bob.create('dev.knotless.comment', {
      subject: f.repoUri,
      body: 'hi',
      createdAt: at(80),
    });
    const noTitle = await f.w.bob.create('dev.knotless.issue', { repo: f.repoUri, createdAt: at(81) });
    await f.w.bob.remove('dev.knotless.comment', f.comments[1]!.rkey);
    await waitFor('the comment deleted', async () =>
      (await getPull()).comments.length === 2 ? true : undefined,
    );
    assert.ok(!(await getPull()).comments.some((c) => c['uri'] === f.comments[1]!.uri));
    assert.deepEqual(
      (await listPulls('all')).pulls.map((p) => p.uri),
      [f.pull.uri],
    );
    assert.ok(!(await listIssues('all')).issues.some((i) => i.uri === noTitle.uri));
    invalid.push(bad.uri, badBranch.uri, stray.uri, noTitle.uri);
  });

  it('a backfill into PostgreSQL gives the same answers, and logs why it skipped the invalid records', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-forge-'));
    const lines: string[] = [];
    const app = await startAppview(
      {
        ...defaultConfig(dir),
        database: await pg.createDatabase('forge'),
        port: 0,
        plcUrl: f.t.net.plcUrl,
        backfillDids: Object.values(f.dids),
        dev: true,
      },
      (l) => lines.push(l),
    );
    try {
      await app.idle();
      const strip = (v: unknown) =>
        JSON.parse(JSON.stringify(v, (k, x: unknown) => (k === 'indexedAt' ? undefined : x))) as unknown;
      assert.deepEqual(strip(await getPull(app)), strip(await getPull()));
      for (const s of ['open', 'closed', 'merged', 'all'])
        assert.deepEqual(strip(await listPulls(s, app)), strip(await listPulls(s)));
      for (const s of ['open', 'closed', 'all'])
        assert.deepEqual(strip(await listIssues(s, app)), strip(await listIssues(s)));
      assert.equal(invalid.length, 4);
      for (const uri of invalid)
        assert.ok(
          lines.some((l) => l.startsWith(`skipping ${uri}: `)),
          `${uri} skipped in ${lines.join('\n')}`,
        );
    } finally {
      await app.close();
    }
  });

  it('round packs a mirror takes in are bounded: past maxRoundBytes a round is refused in one sentence', async () => {
    const { pull } = await getPull();
    // Room for round 0's pack only: round 1's (which holds round 0's commits too) is one too many.
    const limit = pull.rounds[0]!.pack.size;
    const app = await appviewOn(f.t, ':memory:', undefined, {
      maxRoundBytes: limit,
      backfillDids: Object.values(f.dids),
    });
    try {
      await waitFor('the pull request on the second appview', async () =>
        (await xrpc<{ pulls: unknown[] }>(app, 'dev.knotless.listPulls', { repo: f.repoUri, state: 'all' }))
          .pulls.length === 1
          ? true
          : undefined,
      );
      await waitFor('alice.test/site mirrored', () =>
        Promise.resolve(fs.existsSync(app.mirror.gitDir(f.dids.alice, 'site')) ? true : undefined),
      );
      await app.idle();
      const url = `${app.url}/alice.test/site/pulls/${f.dids.bob}/${f.pull.rkey}`;
      const first = await get(`${url}?round=0`);
      assert.equal(first.status, 200);
      assert.match(first.text, /Round 0: changes/);
      const last = await get(`${url}?round=1`);
      assert.equal(last.status, 200);
      assert.match(
        last.text,
        new RegExp(
          `cannot be shown: this repository&#39;s mirror already holds ${limit} bytes of pull request rounds, and this round&#39;s ${pull.rounds[1]!.pack.size} more would pass the limit of ${limit}\\.`,
        ),
      );
      assert.doesNotMatch(last.text, /Round 1: changes/);
    } finally {
      await app.close();
    }
  });

  it("every answer is valid by its query's lexicon (lexicons/dev/knotless/*.json)", async () => {
    const docs: LexiconDoc[] = [];
    const walk = (dir: string): void => {
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (e.name.endsWith('.json')) docs.push(JSON.parse(fs.readFileSync(p, 'utf8')) as LexiconDoc);
      }
    };
    walk(path.join(import.meta.dirname, '..', '..', '..', 'lexicons'));
    const lex = new Lexicons(docs);
    lex.assertValidXrpcOutput('dev.knotless.getPull', await getPull());
    for (const s of ['open', 'closed', 'merged', 'all'])
      lex.assertValidXrpcOutput('dev.knotless.listPulls', await listPulls(s));
    for (const s of ['open', 'closed', 'all'])
      lex.assertValidXrpcOutput('dev.knotless.listIssues', await listIssues(s));
    for (const i of [f.issues.bobs, f.issues.carols])
      lex.assertValidXrpcOutput(
        'dev.knotless.getIssue',
        await xrpc(f.app, 'dev.knotless.getIssue', { uri: i.uri }),
      );
    // And the checker is not lenient: a pull request view without its rounds fails it.
    const { pull, comments } = await getPull();
    assert.throws(() =>
      lex.assertValidXrpcOutput('dev.knotless.getPull', { pull: { ...pull, rounds: undefined }, comments }),
    );
  });
});
