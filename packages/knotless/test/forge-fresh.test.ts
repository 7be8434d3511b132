// Read-your-writes: a user who just commented, merged or closed sees it at once, though the appview
// has not ingested it yet. The appview here is frozen, not slow: it is started on an index that the
// records written after it stopped following the PDS never reach, so nothing depends on timing.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Appview } from '../../knotless-serve/src/appview.ts';
import { appviewOn, waitFor, xrpc } from '../../knotless-serve/test/helpers.ts';
import { knotless } from './helpers/cli.ts';
import { json, openPr, proxyFor, useForgeNet, writeRaw, type ItemJson } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

let app: Appview | undefined;
const {
  t,
  users: [alice, bob, carol],
  env: extra,
} = useForgeNet(['alice.test', 'bob.test', 'carol.test'], () => app?.url);

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-fresh-'));
const database = path.join(dataDir, 'index.sqlite');
let first: ItemJson;
let second: ItemJson;
let third: ItemJson;
let issue: ItemJson;
let made: ItemJson;
let bobClone: string;

const states = async (user: typeof alice, word: 'pr' | 'issue', state = 'all') =>
  json<ItemJson[]>(await user.knotless(word, 'list', 'alice.test/proj', '--state', state, '--json')).map(
    (p) => [p.id, p.state],
  );
const comments = async (user: typeof alice, word: 'pr' | 'issue', id: string) =>
  (json<ItemJson>(await user.knotless(word, 'view', 'alice.test/proj', id, '--json')).comments ?? []).map(
    (c) => [c.author, c.body],
  );

describe('read-your-writes: own records laid over an appview that has not ingested them', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, database, dataDir);
  });
  after(async () => {
    await app?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('sets up pull requests, an issue and a comment, all ingested; then the appview stops following', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'proj')).code, 0);
    const dir = alice.dir();
    await alice.ok(dir, 'init', '-q');
    await commitFiles(alice, dir, { 'README.md': 'proj\n' }, 'first');
    await alice.ok(dir, 'push', '-q', 'knotless://alice.test/proj', 'main');
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/proj', '--name', 'fork')).code, 0);
    const b = bob.dir();
    await bob.ok(b, 'clone', '-q', 'knotless://bob.test/fork', 'c');
    await commitFiles(bob, `${b}/c`, { 'fix.txt': 'fixed\n' }, 'the fix');
    await bob.ok(`${b}/c`, 'push', '-q', 'origin', 'main:fix');
    bobClone = `${b}/c`;
    const open = (title: string) => openPr(bob, 'alice.test/proj', 'fork:fix', title);
    first = await open('First');
    second = await open('Second');
    third = await open('Third');
    issue = json<ItemJson>(
      await bob.knotless('issue', 'create', 'alice.test/proj', '--title', 'It crashes', '--json'),
    );
    assert.equal(
      (await carol.knotless('pr', 'comment', 'alice.test/proj', first.id, '--body', 'LGTM')).code,
      0,
    );
    await waitFor('the appview to ingest everything', async () => {
      const got = await xrpc<{ comments: unknown[] }>(app!, 'dev.knotless.getPull', { uri: first.uri });
      const issues = await xrpc<{ issues: unknown[] }>(app!, 'dev.knotless.listIssues', {
        repo: `at://${t.dids['alice.test']!}/dev.knotless.repo/proj`,
      });
      return got.comments.length === 1 && issues.issues.length === 1 ? true : undefined;
    });
    await app!.close();
    app = await appviewOn(t, database, dataDir, { firehoses: [] });
    assert.deepEqual(await states(alice, 'pr'), [
      [third.id, 'open'],
      [second.id, 'open'],
      [first.id, 'open'],
    ]);
  });

  it("a comment shows at once in its writer's view; the appview still supplies others' comments", async () => {
    assert.equal(
      (await bob.knotless('pr', 'comment', 'alice.test/proj', first.id, '--body', 'Thanks')).code,
      0,
    );
    assert.deepEqual(await comments(bob, 'pr', first.id), [
      ['carol.test', 'LGTM'],
      ['bob.test', 'Thanks'],
    ]);
    // Alice reads only the appview's comments, which lack bob's: the appview is indeed behind.
    assert.deepEqual(await comments(alice, 'pr', first.id), [['carol.test', 'LGTM']]);
    const text = await bob.knotless('pr', 'view', 'alice.test/proj', first.id);
    assert.match(text.stdout, /comments \(2\)/);

    assert.equal(
      (await carol.knotless('issue', 'comment', 'alice.test/proj', issue.id, '--body', 'Me too')).code,
      0,
    );
    assert.deepEqual(await comments(carol, 'issue', issue.id), [['carol.test', 'Me too']]);
    assert.deepEqual(await comments(bob, 'issue', issue.id), []);
  });

  it('a merge by the owner shows at once in her listing, in every state filter, and in the author’s', async () => {
    const merged = json<ItemJson>(await alice.knotless('pr', 'merge', 'alice.test/proj', first.id, '--json'));
    assert.equal(merged.state, 'merged');
    assert.deepEqual(await states(alice, 'pr'), [
      [third.id, 'open'],
      [second.id, 'open'],
      [first.id, 'merged'],
    ]);
    // Listed as merged though the appview lists it among the open ones, and no longer among those.
    assert.deepEqual(await states(alice, 'pr', 'merged'), [[first.id, 'merged']]);
    assert.deepEqual(await states(alice, 'pr', 'open'), [
      [third.id, 'open'],
      [second.id, 'open'],
    ]);
    const listed = json<ItemJson[]>(
      await alice.knotless('pr', 'list', 'alice.test/proj', '--state', 'merged', '--json'),
    );
    assert.equal(listed[0]?.merged, merged.merged);
    // The author reads the owner's recent records too: her decisions are the ones that count.
    assert.deepEqual(await states(bob, 'pr', 'merged'), [[first.id, 'merged']]);
    // Anyone reads the owner's recent records beside their own.
    assert.deepEqual(await states(carol, 'pr', 'merged'), [[first.id, 'merged']]);
  });

  it('a close by the author shows at once; the owner cannot reopen it over him, he can', async () => {
    assert.equal((await bob.knotless('pr', 'close', 'alice.test/proj', second.id)).code, 0);
    assert.deepEqual(await states(bob, 'pr', 'closed'), [[second.id, 'closed']]);
    assert.deepEqual(await states(bob, 'pr', 'open'), [[third.id, 'open']]);
    // Alice reads her own and the appview's, which is behind: bob's close is not seen yet by others.
    assert.deepEqual(await states(alice, 'pr', 'closed'), []);
    const denied = await alice.knotless('pr', 'reopen', 'alice.test/proj', second.id);
    assert.equal(denied.code, 5, denied.stderr);
    assert.equal(
      denied.stderr.trim(),
      `knotless: Its author, bob.test, closed ${second.id}; only they can reopen it.`,
    );
    assert.equal((await bob.knotless('pr', 'reopen', 'alice.test/proj', second.id)).code, 0);
    assert.deepEqual(await states(bob, 'pr', 'open'), [
      [third.id, 'open'],
      [second.id, 'open'],
    ]);
  });

  it('a pull request and an issue just created are listed at once, by their author and by the owner for hers', async () => {
    await commitFiles(bob, bobClone, { 'more.txt': 'more\n' }, 'more');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'main:more');
    const fourth = await openPr(bob, 'alice.test/proj', 'fork:more', 'Fourth');
    assert.deepEqual((await states(bob, 'pr', 'open'))[0], [fourth.id, 'open']);
    const view = json<ItemJson>(await bob.knotless('pr', 'view', 'alice.test/proj', fourth.id, '--json'));
    assert.equal(view.title, 'Fourth');
    made = json<ItemJson>(
      await alice.knotless('issue', 'create', 'alice.test/proj', '--title', 'Owner note', '--json'),
    );
    for (const user of [alice, bob, carol])
      assert.deepEqual(await states(user, 'issue', 'open'), [
        [made.id, 'open'],
        [issue.id, 'open'],
      ]);
    // The appview is indeed behind: it lists neither.
    const listed = await xrpc<{ issues: unknown[] }>(app!, 'dev.knotless.listIssues', {
      repo: `at://${t.dids['alice.test']!}/dev.knotless.repo/proj`,
      state: 'all',
    });
    assert.equal(listed.issues.length, 1);
    assert.equal((await alice.knotless('issue', 'close', 'alice.test/proj', made.id)).code, 0);
    assert.deepEqual(await states(bob, 'issue', 'closed'), [[made.id, 'closed']]);
    assert.equal((await bob.knotless('pr', 'close', 'alice.test/proj', fourth.id)).code, 0);
  });

  it("an empty listing names the appview it came from and that it can be behind: someone else's new issue is not in it yet", async () => {
    assert.equal((await alice.knotless('repo', 'create', 'later')).code, 0);
    const opened = await bob.knotless('issue', 'create', 'alice.test/later', '--title', 'Just now');
    assert.equal(opened.code, 0, opened.stderr);
    const behind = (what: string) =>
      `alice.test/later has no open ${what} that the appview at ${app!.url} lists; it learns of new ones a few seconds after they are written (new ones of yours and of the owner's are read from their accounts).\n`;
    for (const [word, what] of [
      ['issue', 'issues'],
      ['pr', 'pull requests'],
    ] as const) {
      const res = await carol.knotless(word, 'list', 'alice.test/later');
      assert.equal(res.code, 0, res.stderr);
      assert.equal(res.stdout, '');
      assert.equal(res.stderr, behind(what));
    }
  });

  it('an issue closed by the owner is listed closed at once, and stays closed against the author', async () => {
    assert.equal((await alice.knotless('issue', 'close', 'alice.test/proj', issue.id)).code, 0);
    assert.deepEqual(await states(alice, 'issue', 'closed'), [
      [made.id, 'closed'],
      [issue.id, 'closed'],
    ]);
    assert.deepEqual(await states(alice, 'issue', 'open'), []);
    // The author's latest record is dated long after the owner's close: a rule that
    // trusted createdAt would take it as the last word.
    for (const createdAt of ['1970-01-01T00:00:00.000Z', '2099-01-01T00:00:00.000Z'])
      await writeRaw(t, 'bob.test', 'dev.knotless.issue.state', {
        issue: issue.uri,
        state: 'open',
        createdAt,
      });
    for (const user of [alice, bob]) {
      assert.ok((await states(user, 'issue')).some(([id, s]) => id === issue.id && s === 'closed'));
      const v = json<ItemJson>(await user.knotless('issue', 'view', 'alice.test/proj', issue.id, '--json'));
      assert.equal(v.state, 'closed');
    }
  });

  it('checks what it reads from the PDS as records: an invalid one is skipped, one the rule ignores does not count, text is escaped', async () => {
    const now = () => new Date().toISOString();
    await writeRaw(t, 'bob.test', 'dev.knotless.comment', {
      subject: third.uri,
      body: 'evil \u001b[31mred',
      createdAt: now(),
    });
    await writeRaw(t, 'bob.test', 'dev.knotless.pull.status', {
      pull: third.uri,
      status: 'merged',
      createdAt: now(),
    });
    await writeRaw(t, 'bob.test', 'dev.knotless.pull.status', { pull: third.uri, status: 'closed' });
    const listed = await bob.knotless('pr', 'list', 'alice.test/proj', '--state', 'all');
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, new RegExp(`${third.id}  open`));
    assert.match(listed.stderr, /warning: An invalid dev\.knotless\.pull\.status record/);
    const view = await bob.knotless('pr', 'view', 'alice.test/proj', third.id);
    assert.equal(view.code, 0, view.stderr);
    assert.match(view.stdout, /comments \(1\)/);
    assert.match(view.stdout, /evil \\x1b\[31mred/);
    assert.ok(!view.stdout.includes('\u001b'), 'no raw escape reaches the terminal');
  });

  it("costs one listRecords page of the user's own items and one of their states, as many of the owner's; none without a user", async () => {
    const proxy = await proxyFor(t, 'alice.test');
    try {
      const via = (user: typeof alice) => ({ ...user.env, ...extra(), KNOTLESS_SERVICE: proxy.url });
      const pages = (collection: string) =>
        proxy.requests.filter(
          (r) =>
            r.nsid === 'com.atproto.repo.listRecords' &&
            new URL(r.path, proxy.url).searchParams.get('collection') === collection,
        );
      const cost = async (env: Record<string, string>, args: string[], collection: string) => {
        proxy.reset();
        const res = await knotless(args, { env });
        assert.equal(res.code, 0, res.stderr);
        return pages(collection).map((r) => new URL(r.path, proxy.url).searchParams.get('limit'));
      };
      const list = ['pr', 'list', 'alice.test/proj', '--state', 'all'];
      assert.deepEqual(await cost(via(alice), list, 'dev.knotless.pull.status'), ['25']);
      assert.deepEqual(await cost(via(bob), list, 'dev.knotless.pull.status'), ['25', '25']);
      assert.deepEqual(await cost(via(alice), list, 'dev.knotless.pull'), ['25']);
      assert.deepEqual(await cost(via(bob), list, 'dev.knotless.pull'), ['25', '25']);
      const anonymous = t.env({ KNOTLESS_APPVIEW: app!.url, KNOTLESS_SERVICE: proxy.url });
      assert.deepEqual(await cost(anonymous, list, 'dev.knotless.pull.status'), []);
      const view = ['issue', 'view', 'alice.test/proj', issue.id];
      assert.deepEqual(await cost(via(carol), view, 'dev.knotless.comment'), ['25']);
      assert.deepEqual(await cost(anonymous, view, 'dev.knotless.comment'), []);
    } finally {
      await proxy.close();
    }
  });

  it("an author's reopen dated after the owner's close counts nowhere: appview, list and view say closed", async () => {
    assert.equal((await alice.knotless('pr', 'close', 'alice.test/proj', third.id)).code, 0);
    // The author's latest record is dated long after the owner's close: a rule that
    // trusted createdAt would take it as the last word.
    for (const createdAt of ['1970-01-01T00:00:00.000Z', '2099-01-01T00:00:00.000Z'])
      await writeRaw(t, 'bob.test', 'dev.knotless.pull.status', {
        pull: third.uri,
        status: 'open',
        createdAt,
      });
    // The appview follows again until it holds bob's records and alice's close (a later comment of
    // each: bob and alice are on different PDSes, whose streams it replays side by side, in no order
    // between them), then stops.
    for (const [user, body] of [
      [bob, 'again'],
      [alice, 'noted'],
    ] as const)
      assert.equal(
        (await user.knotless('pr', 'comment', 'alice.test/proj', third.id, '--body', body)).code,
        0,
      );
    await app!.close();
    app = await appviewOn(t, database, dataDir);
    const got = await waitFor('the appview to index both comments', async () => {
      const g = await xrpc<{ pull: { state: string }; comments: { body: string }[] }>(
        app!,
        'dev.knotless.getPull',
        { uri: third.uri },
      );
      const bodies = g.comments.map((c) => c.body);
      return bodies.includes('again') && bodies.includes('noted') ? g : undefined;
    });
    assert.equal(got.pull.state, 'closed');
    await app.close();
    app = await appviewOn(t, database, dataDir, { firehoses: [] });
    for (const user of [alice, bob, carol]) {
      assert.ok((await states(user, 'pr')).some(([id, s]) => id === third.id && s === 'closed'));
      const v = json<ItemJson>(await user.knotless('pr', 'view', 'alice.test/proj', third.id, '--json'));
      assert.equal(v.state, 'closed');
    }
    const proxy = await proxyFor(t, 'alice.test');
    try {
      const res = await knotless(['pr', 'list', 'alice.test/proj', '--state', 'all', '--json'], {
        env: { ...alice.env, ...extra(), KNOTLESS_SERVICE: proxy.url },
      });
      assert.equal(json<ItemJson[]>(res).find((p) => p.id === third.id)?.state, 'closed');
      // Alice's pages only: her close stands whatever bob wrote, so his records are not read.
      const pages = proxy.requests
        .filter((r) => r.nsid === 'com.atproto.repo.listRecords')
        .map((r) => new URL(r.path, proxy.url).searchParams.get('repo'));
      assert.deepEqual(pages, [t.dids['alice.test'], t.dids['alice.test']]);
    } finally {
      await proxy.close();
    }
  });
});
