// The appview and a repository's maintainers (format.md, "Teams" and "The authority rule"): the
// owner's ref table lists them, the index keeps the list (migration 0013), and a maintainer's
// decisions count as the owner's in the index; removing one from the list makes theirs count for
// nothing. Repository pages name the maintainers, the owner's page is an organisation's page (its
// repositories with their maintainers, and everyone who maintains one), a maintainer's page lists
// what they maintain, and a maintainer's table write is a push naming them on the home page and in
// listPushes. Hostile: 50 maintainers, DIDs that resolve to nothing, a non-maintainer's table and
// decisions under the repository's name, text that must be escaped. On a real PDS, for both index
// backends; then in Chromium, a signed-in maintainer closes an issue from the owner's buttons.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { jsonToLex } from '@atproto/lexicon';
import { cidForRecord } from '@atproto/repo';
import { parseRefRecord } from 'knotless-core/records/ref-record';
import {
  applyRefUpdates,
  layoutRefTable,
  parseRefTable,
  refTableKey,
  type RefTable,
} from 'knotless-core/records/ref-table';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { Notifications } from '../src/db/notifications.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { startReceiver } from './webhook-receiver.ts';
import { listOwn, signIn } from './web-forge-kit.ts';
import { uploadRaw } from '../../knotless/test/helpers/forge.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test', 'dave.test']);
// alice pushes to ref records (KNOTLESS_REF_TABLE=0; a new repository starts on its table by
// default): her tables here are written from those records (aliceTable), as a migration writes them.
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_REF_TABLE: '0' }));
let pg: PgServer;
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
});

const TABLE = 'dev.knotless.refs';
/** 48 maintainers whose DIDs no PLC directory knows, beside bob and carol: 50 in all. */
const GHOSTS = Array.from(
  { length: 48 },
  (_, i) => `did:plc:${'ghost'.padEnd(20, 'x')}${String(i).padStart(4, 'a')}`,
);

async function session(handle: string): Promise<{ accessJwt: string; did: string }> {
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: handle, password: t.password }),
  });
  return (await res.json()) as { accessJwt: string; did: string };
}

/** Puts a record into `handle`'s account under `rkey` (a new TID when absent); returns its at-uri. */
async function put(handle: string, collection: string, record: Record<string, unknown>, rkey?: string) {
  const s = await session(handle);
  const res = await fetch(
    `${t.net.pdsUrl}/xrpc/com.atproto.repo.${rkey === undefined ? 'createRecord' : 'putRecord'}`,
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.accessJwt}` },
      body: JSON.stringify({
        repo: s.did,
        collection,
        ...(rkey === undefined ? {} : { rkey }),
        record,
        validate: false,
      }),
    },
  );
  const out = (await res.json()) as { uri: string };
  assert.equal(res.status, 200, JSON.stringify(out));
  return out.uri;
}

const cidOf = async (value: Record<string, unknown>) =>
  (await cidForRecord(jsonToLex(value) as Parameters<typeof cidForRecord>[0])).toString();

/** Alice's table of `name`: her ref records' refs (with their packs), listing `maintainers`. */
async function aliceTable(name: string, maintainers: string[]): Promise<void> {
  const url = new URL('/xrpc/com.atproto.repo.listRecords', t.net.pdsUrl);
  url.searchParams.set('repo', t.dids['alice.test']!);
  url.searchParams.set('collection', 'dev.knotless.ref');
  url.searchParams.set('limit', '100');
  const body = (await (await fetch(url)).json()) as { records: { value: unknown }[] };
  const refs = body.records
    .map((r) => parseRefRecord(r.value))
    .filter((r) => r.repo === name && r.target !== undefined)
    .map((r) => ({ ref: r.ref, target: r.target!, packs: r.packs }));
  const repo = `at://${t.dids['alice.test']}/dev.knotless.repo/${name}`;
  const table = applyRefUpdates(
    undefined,
    refs,
    { repo, head: 'refs/heads/main', maintainer: false },
    new Date(),
  );
  table.head = 'refs/heads/main';
  table.maintainers = maintainers.map((did) => ({ did, since: new Date().toISOString() }));
  const writes = await layoutRefTable(table, name, cidOf);
  assert.equal(writes.create.length, 0);
  await put('alice.test', TABLE, writes.table, name);
}

/**
 * `handle`'s own table of alice's repository `name`, under the key a maintainer's has, moving `ref`
 * to `target` over alice's value `over` (none: she has no such ref).
 */
async function memberTable(
  handle: string,
  name: string,
  ref: string,
  target: string,
  seq: number,
  over?: string,
) {
  const owner = t.dids['alice.test']!;
  const repo = `at://${owner}/dev.knotless.repo/${name}`;
  const table: RefTable = applyRefUpdates(
    undefined,
    [{ ref, target, packs: [], over: [over === undefined ? { did: owner } : { did: owner, target: over }] }],
    { repo, maintainer: true },
    new Date(),
  );
  table.seq = seq;
  const writes = await layoutRefTable(table, name, cidOf);
  // A valid maintainer's table, under the key a maintainer's has: `name~<owner DID>` (format.md).
  parseRefTable(writes.table, repo, false);
  await put(handle, TABLE, writes.table, refTableKey(name, owner, t.dids[handle]!));
}

interface IssueView {
  issue: { state: string; labels: string[] };
}

async function issueState(app: Appview, uri: string): Promise<{ state: string; labels: string[] }> {
  const v = await xrpc<IssueView>(app, 'dev.knotless.getIssue', { uri });
  return { state: v.issue.state, labels: v.issue.labels };
}

async function until(app: Appview, uri: string, want: { state: string; labels: string[] }, what: string) {
  // An issue not indexed yet is an error answer, which waitFor waits past as it waits past any.
  await waitFor(what, async () =>
    JSON.stringify(await issueState(app, uri)) === JSON.stringify(want) ? true : undefined,
  );
}

interface PushView {
  repo: string;
  ref: string;
  after?: string;
  pusher?: string;
  pusherHandle?: string;
}

/**
 * Alice's repository `name` (a description to escape, one commit), made while `app` follows, on a
 * table listing `maintainers`; returns its work tree once the appview shows its page.
 */
async function orgRepo(app: Appview, name: string, maintainers: string[]): Promise<string> {
  const made = await alice.knotless(
    'repo',
    'create',
    name,
    '--description',
    '<script>alert(1)</script> & co',
  );
  assert.equal(made.code, 0, made.stderr);
  const work = await newRepo(alice, `knotless://alice.test/${name}`);
  await commitFiles(alice, work, { 'README.md': '# Org\n' }, 'start');
  await alice.ok(work, 'push', '-q', 'origin', 'main');
  await aliceTable(name, maintainers);
  await waitFor(`alice.test/${name} indexed`, async () =>
    (await fetch(`${app.url}/alice.test/${name}`)).status === 200 ? true : undefined,
  );
  return work;
}

describe('the appview and maintainers', () => {
  before(async () => {
    await t.ready;
  });

  for (const backend of ['sqlite', 'postgres'] as const) {
    describe(`indexing (${backend})`, () => {
      let app: Appview;
      let work = '';
      const ORG = `org-${backend}`;
      before(async () => {
        app = await appviewOn(
          t,
          backend === 'sqlite' ? ':memory:' : await pg.createDatabase(`maint_${backend}`),
        );
        work = await orgRepo(app, ORG, [t.dids['bob.test']!, t.dids['carol.test']!, ...GHOSTS]);
      });
      after(async () => {
        await app?.close();
      });

      it("keeps the owner's list of 50 maintainers and decides with it; a non-maintainer counts for nothing", async () => {
        const bob = t.dids['bob.test']!;
        const carol = t.dids['carol.test']!;
        await waitFor('the list indexed', async () =>
          (await app.index.maintainers(t.dids['alice.test']!, ORG)).some((m) => m.did === carol)
            ? true
            : undefined,
        );
        assert.ok((await app.index.maintainers(t.dids['alice.test']!, ORG)).some((m) => m.did === bob));
        const repo = `at://${t.dids['alice.test']}/dev.knotless.repo/${ORG}`;
        const issue = await put('dave.test', 'dev.knotless.issue', {
          $type: 'dev.knotless.issue',
          repo,
          title: 'Crash',
          createdAt: new Date().toISOString(),
        });
        await until(app, issue, { state: 'open', labels: [] }, 'the issue indexed');
        await waitFor('50 maintainers indexed', async () =>
          (await app.index.maintainers(t.dids['alice.test']!, ORG)).length === 50 ? true : undefined,
        );
        // Bob's close counts; then dave's reopen as author counts against nothing of the team's close.
        await put('bob.test', 'dev.knotless.issue.state', {
          $type: 'dev.knotless.issue.state',
          issue,
          state: 'closed',
          labels: ['<i>triaged</i>'],
          createdAt: new Date().toISOString(),
        });
        await until(app, issue, { state: 'closed', labels: ['<i>triaged</i>'] }, "bob's close counted");
        // The issue's author is told of the maintainer's decision, as of the owner's.
        const told = await new Notifications(app.index.db).list(t.dids['dave.test']!, 'dave.test');
        assert.deepEqual(
          told
            .filter((n) => n.kind === 'decision')
            .map((n) => [n.did, n.detail, n.item.repoDid, n.item.repoName]),
          [[bob, 'closed', t.dids['alice.test'], ORG]],
        );
        // Someone outside the team (a second issue, decided by a stranger) changes nothing.
        const other = await put('carol.test', 'dev.knotless.issue', {
          $type: 'dev.knotless.issue',
          repo,
          title: 'Other',
          createdAt: new Date().toISOString(),
        });
        await put(
          'dave.test',
          'dev.knotless.issue.state',
          {
            $type: 'dev.knotless.issue.state',
            issue: other,
            state: 'closed',
            createdAt: '2099-01-01T00:00:00.000Z',
          },
          'zzzzzzzzzzzzz',
        );
        // Dave's close of carol's issue, keyed after every key and dated 2099, is nobody's decision.
        await waitFor("dave's record indexed", async () =>
          (await app.index.forge.decisions('issues', t.dids['carol.test']!, other.split('/').pop()!))
            .length === 1
            ? true
            : undefined,
        );
        await until(app, other, { state: 'open', labels: [] }, 'the second issue open');
      });

      it("notes a maintainer's table write as their push, queues its webhook, and ignores a non-maintainer's under the same key", async () => {
        const rx = await startReceiver();
        after(() => rx.close());
        await app.index.webhooks.add(t.dids['alice.test']!, ORG, rx.url);
        const start = (await alice.ok(work, 'rev-parse', 'HEAD')).trim();
        const news = await commitFiles(alice, work, { 'b.txt': 'b\n' }, 'b');
        // Bob's main replaces alice's (its `over` names her value): the team's main moves, by bob.
        await memberTable('bob.test', ORG, 'refs/heads/main', news, 0, start);
        await memberTable('dave.test', ORG, 'refs/heads/evil', news, 0);
        const pushes = await waitFor("bob's push noted", async () => {
          const got = await xrpc<{ pushes: PushView[] }>(app, 'dev.knotless.listPushes', {
            actor: 'alice.test',
            repo: ORG,
          });
          return got.pushes.some((p) => p.pusher !== undefined) ? got.pushes : undefined;
        });
        const byBob = pushes.filter((p) => p.pusher !== undefined);
        assert.deepEqual(
          byBob.map((p) => [p.ref, p.after, p.pusher, p.pusherHandle]),
          [['refs/heads/main', news, t.dids['bob.test'], 'bob.test']],
        );
        assert.ok(!pushes.some((p) => p.ref === 'refs/heads/evil'), 'dave maintains nothing');
        // The push webhook, with bob as the pusher.
        type Hooked = {
          event?: string;
          ref?: string;
          after?: string;
          pusher?: { did: string; handle: string | null };
        };
        const events = () => rx.received.map((r) => JSON.parse(r.body) as Hooked);
        const hooked = await waitFor("bob's push delivered", () =>
          Promise.resolve(events().find((e) => e.event === 'push' && e.pusher?.did === t.dids['bob.test'])),
        );
        assert.deepEqual(
          [hooked.ref, hooked.after, hooked.pusher?.handle],
          ['refs/heads/main', news, 'bob.test'],
        );
        assert.ok(!events().some((e) => e.ref === 'refs/heads/evil'), 'no webhook for a non-maintainer');
        const home = await get(`${app.url}/`);
        assert.match(
          home.text,
          /by <a href="\/bob\.test">bob\.test<\/a> <span class="pill">maintainer<\/span>/,
        );
        assert.match(home.text, new RegExp(`by <a href="/alice\\.test">alice\\.test</a>`));
      });

      it("names the maintainers on the repository page, the organisation page and a maintainer's page, escaped", async () => {
        const page = await get(`${app.url}/alice.test/${ORG}`);
        assert.equal(page.status, 200);
        assert.match(page.text, /maintainers:/);
        assert.match(page.text, /<a class="who maintainer" href="\/bob\.test">bob\.test<\/a>/);
        assert.match(page.text, /<a class="who maintainer" href="\/carol\.test">carol\.test<\/a>/);
        // A DID that resolves to nothing is named by itself.
        assert.ok(page.text.includes(`href="/${encodeURIComponent(GHOSTS[47]!)}">${GHOSTS[47]}</a>`));
        assert.ok(!page.text.includes('<script>alert(1)</script>'));
        assert.ok(page.text.includes('&lt;script&gt;alert(1)&lt;/script&gt; &amp; co'));
        const org = await get(`${app.url}/alice.test`);
        assert.match(org.text, /<h2 id="members-h">Maintainers<\/h2>/);
        // The 50 members once, and under each of alice's repositories that lists them.
        assert.match(org.text, /<section class="org" aria-labelledby="members-h">/);
        assert.ok(org.text.includes(`href="/${encodeURIComponent(GHOSTS[0]!)}">${GHOSTS[0]}</a>`));
        const bobs = await get(`${app.url}/bob.test`);
        assert.match(bobs.text, /<h2>Maintains<\/h2>/);
        assert.ok(bobs.text.includes(`<a href="/alice.test/${ORG}">alice.test/${ORG}</a>`));
        // Bob's label, as his close gave it, on the issue's page: escaped.
        const listed = await xrpc<{ issues: { uri: string; title: string }[] }>(
          app,
          'dev.knotless.listIssues',
          {
            repo: `at://${t.dids['alice.test']}/dev.knotless.repo/${ORG}`,
            state: 'all',
          },
        );
        const crash = listed.issues.find((i) => i.title === 'Crash')!.uri.split('/');
        const issue = await get(`${app.url}/alice.test/${ORG}/issues/${crash[2]}/${crash[4]}`);
        assert.equal(issue.status, 200);
        assert.ok(issue.text.includes('&lt;i&gt;triaged&lt;/i&gt;'));
        assert.ok(!issue.text.includes('<i>triaged</i>'));
      });

      it("stops counting a maintainer's decisions once the owner's table drops them", async () => {
        const repo = `at://${t.dids['alice.test']}/dev.knotless.repo/${ORG}`;
        const issues = await xrpc<{ issues: { uri: string; title: string }[] }>(
          app,
          'dev.knotless.listIssues',
          {
            repo,
            state: 'all',
          },
        );
        const crash = issues.issues.find((i) => i.title === 'Crash')!.uri;
        await aliceTable(ORG, [t.dids['carol.test']!, ...GHOSTS]);
        await until(app, crash, { state: 'open', labels: [] }, "bob's close no longer counting");
        assert.equal(
          (await get(`${app.url}/alice.test/${ORG}`)).text.includes('href="/bob.test">bob.test</a>'),
          false,
        );
        await aliceTable(ORG, [t.dids['bob.test']!, t.dids['carol.test']!, ...GHOSTS]);
        await until(
          app,
          crash,
          { state: 'closed', labels: ['<i>triaged</i>'] },
          "bob's close counting again",
        );
      });
    });
  }

  describe('in Chromium', () => {
    let app: Appview;
    let browser: BrowserContext;
    let page: Page;
    let cspErrors: string[];
    before(async () => {
      app = await appviewOn(t, ':memory:');
      await orgRepo(app, 'org-web', [t.dids['bob.test']!]);
      browser = await launchBrowser();
      ({ page, cspErrors } = await watchedPage(browser));
    });
    after(async () => {
      await browser?.close();
      await app?.close();
    });

    it("a signed-in maintainer sees the owner's buttons on another's repository and closes an issue", async () => {
      const repo = `at://${t.dids['alice.test']}/dev.knotless.repo/org-web`;
      const issue = await put('dave.test', 'dev.knotless.issue', {
        $type: 'dev.knotless.issue',
        repo,
        title: 'From the browser',
        createdAt: new Date().toISOString(),
      });
      await until(app, issue, { state: 'open', labels: [] }, 'the issue indexed');
      const path = `/alice.test/org-web/issues/${issue.split('/')[2]}/${issue.split('/').pop()}`;
      await signIn(page, app.url, 'bob.test', t.password);
      await page.goto(`${app.url}${path}`);
      await checkPage(page, cspErrors, 'an issue on a repository the reader maintains');
      assert.equal(await page.getByRole('button', { name: 'Save labels' }).count(), 1);
      await page.getByRole('button', { name: 'Close' }).click();
      await page.getByRole('button', { name: 'Reopen' }).waitFor();
      await until(app, issue, { state: 'closed', labels: [] }, "bob's close from the browser");
      const own = await listOwn(t, 'bob.test', 'dev.knotless.issue.state');
      assert.ok(own.some((r) => r.value['issue'] === issue && r.value['state'] === 'closed'));

      // A pull request: bob sees the merge button too (web-protect-team merges with it).
      const head = 'a'.repeat(40);
      const pack = await uploadRaw(t, 'dave.test', new Uint8Array([80, 65, 67, 75]));
      const pull = await put('dave.test', 'dev.knotless.pull', {
        $type: 'dev.knotless.pull',
        repo,
        base: 'main',
        head: { repo, branch: 'topic' },
        title: 'A change',
        rounds: [{ head, base: 'b'.repeat(40), pack, createdAt: new Date().toISOString() }],
        createdAt: new Date().toISOString(),
      });
      const pullPath = `/alice.test/org-web/pulls/${pull.split('/')[2]}/${pull.split('/').pop()}`;
      await waitFor('the pull request indexed', async () =>
        (await fetch(`${app.url}${pullPath}`)).status === 200 ? true : undefined,
      );
      await page.goto(`${app.url}${pullPath}`);
      assert.equal(await page.getByRole('button', { name: 'Merge pull request' }).count(), 1);
      assert.equal(await page.getByRole('button', { name: 'Close' }).count(), 1);
    });

    it('a signed-in reader who maintains nothing sees no such buttons', async () => {
      await page.context().clearCookies();
      await signIn(page, app.url, 'dave.test', t.password);
      const repo = `at://${t.dids['alice.test']}/dev.knotless.repo/org-web`;
      const issues = await xrpc<{ issues: { uri: string; title: string }[] }>(
        app,
        'dev.knotless.listIssues',
        {
          repo,
          state: 'all',
        },
      );
      const other = issues.issues.find((i) => i.title === 'From the browser')!.uri;
      await page.goto(
        `${app.url}/alice.test/org-web/issues/${other.split('/')[2]}/${other.split('/').pop()}`,
      );
      assert.equal(await page.getByRole('button', { name: 'Close' }).count(), 0);
      assert.equal(await page.getByRole('button', { name: 'Save labels' }).count(), 0);
    });
  });
});
