// Stars and comments on a line of a round's diff, from the browser, on an appview whose index is
// PostgreSQL (web-forge.test.ts runs the rest of the flow on SQLite): the sign-in's sessions, the
// stars, the line comments and the notifications all live in the PostgreSQL tables here. Every
// record is read back from its author's own PDS; the CLI reads and writes line comments too.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pgDriver from 'pg';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { commitBehindThePage, listOwn, mainOf, pdsOf, sealedSessionOf, signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

let pg: PgServer;
let database = '';
let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let pullPath: string;
/** What the appview logged. */
const logged: string[] = [];

/** The repository page's star count, as its text says it. */
async function starsShown(): Promise<string> {
  await page.goto(`${app.url}/alice.test/site`);
  return (await page.locator('.stars').innerText()).replace(/\s+(Star|Unstar)$/, '').trim();
}

/** A record written straight into bob's account with his password (not through the appview). */
async function writeAsBob(collection: string, record: Record<string, unknown>): Promise<void> {
  const pds = await pdsOf(t, 'bob.test');
  const login = await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'bob.test', password: t.password }),
  });
  const { accessJwt } = (await login.json()) as { accessJwt: string };
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.createRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${accessJwt}` },
    body: JSON.stringify({ repo: t.dids['bob.test'], collection, record: { $type: collection, ...record } }),
  });
  assert.equal(res.status, 200, await res.clone().text());
}

describe('stars and line comments from the browser, indexed in PostgreSQL', () => {
  before(async () => {
    await t.ready;
    pg = await startPostgres();
    database = await pg.createDatabase('webforge');
    app = await appviewOn(t, database, undefined, {}, (line) => logged.push(line));
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, work, { 'a.txt': 'one\ntwo\nthree\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const clone = bob.dir();
    await bob.ok(clone, 'clone', '-q', 'knotless://bob.test/site', '.');
    await bob.ok(clone, 'checkout', '-q', '-b', 'four');
    await commitFiles(bob, clone, { 'a.txt': 'one\ntwo\nthree\nfour\n' }, 'count to four');
    await bob.ok(clone, 'push', '-q', 'origin', 'four');
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    await waitFor('the fork mirrored', async () => {
      const res = await fetch(`${app.url}/bob.test/site/compare/main...four`);
      return res.status === 200 && (await res.text()).includes('Open a pull request') ? true : undefined;
    });
    await signIn(page, app.url, 'bob.test', t.password);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await pg?.stop();
  });

  it("bob stars alice's repository: the record is in his account, the page counts one per account", async () => {
    assert.equal(await starsShown(), '0 stars');
    await checkPage(page, cspErrors, 'repository page with the star button');
    await page.getByRole('button', { name: 'Star', exact: true }).click();
    await page.getByRole('button', { name: 'Unstar' }).waitFor();
    assert.equal(await starsShown(), '1 star');
    assert.equal(
      (await xrpc<{ starCount: number }>(app, 'dev.knotless.getRepo', { actor: 'alice.test', repo: 'site' }))
        .starCount,
      1,
    );
    // While bob's account is not active (as the index records it), his star counts for nothing.
    const bobStatus = (status: string | null) =>
      app.index.db.updateTable('owners').set({ status }).where('did', '=', t.dids['bob.test']!).execute();
    await bobStatus('deactivated');
    assert.equal(await app.index.forge.stars(t.dids['alice.test']!, 'site'), 0);
    await bobStatus(null);
    const stars = await listOwn(t, 'bob.test', 'dev.knotless.star');
    assert.equal(stars.length, 1);
    assert.equal(stars[0]!.value['subject'], `at://${t.dids['alice.test']!}/dev.knotless.repo/site`);
    // A second star record of bob's, and one naming no repository, change nothing: one per account.
    await writeAsBob('dev.knotless.star', {
      subject: stars[0]!.value['subject'],
      createdAt: new Date().toISOString(),
    });
    await writeAsBob('dev.knotless.star', {
      subject: `at://${t.dids['alice.test']!}/dev.knotless.repo/nothing-here`,
      createdAt: new Date().toISOString(),
    });
    await waitFor('both new stars indexed', async () => {
      const rows = await app.index.db.selectFrom('stars').select('rkey').where('deleted', '=', 0).execute();
      return rows.length === 3 ? true : undefined;
    });
    assert.equal(await starsShown(), '1 star');
    // Unstar deletes every star of bob's on it, the one the appview did not write too.
    await page.getByRole('button', { name: 'Unstar' }).click();
    await page.getByRole('button', { name: 'Star', exact: true }).waitFor();
    assert.equal(await starsShown(), '0 stars');
    const left = await listOwn(t, 'bob.test', 'dev.knotless.star');
    assert.deepEqual(
      left.map((s) => s.value['subject']),
      [`at://${t.dids['alice.test']!}/dev.knotless.repo/nothing-here`],
    );
  });

  it("bob comments on a line of the round's diff; it shows beside the line and is in his account", async () => {
    await page.goto(`${app.url}/bob.test/site/compare/main...four`);
    await page.getByLabel('Title').fill('Count to four');
    await page.getByRole('button', { name: 'Open pull request' }).click();
    await page.getByRole('heading', { name: 'Count to four' }).waitFor();
    pullPath = new URL(page.url()).pathname;
    await page.getByRole('link', { name: 'Comment on a.txt line 4' }).click();
    await checkPage(page, cspErrors, 'round diff with a line comment form');
    await page.getByRole('textbox', { name: 'Comment on a.txt line 4' }).fill('Four is enough.');
    await page.getByRole('button', { name: 'Comment on line' }).click();
    await page.locator('tr.notes', { hasText: 'Four is enough.' }).waitFor();
    assert.match(
      await page.locator('article.comment', { hasText: 'Four is enough.' }).last().innerText(),
      /on a\.txt line 4/,
    );
    await checkPage(page, cspErrors, 'round diff with a line comment');
    const comments = await listOwn(t, 'bob.test', 'dev.knotless.comment');
    assert.equal(comments.length, 1);
    const c = comments[0]!.value;
    assert.deepEqual([c['round'], c['path'], c['line'], c['body']], [0, 'a.txt', 4, 'Four is enough.']);
    // A line without its round is refused with a sentence, and nothing is written.
    const csrf = await page.locator('form[action="/-/signout"] input[name="csrf"]').inputValue();
    const bad = await page.request.post(`${app.url}${pullPath}/comment`, {
      form: { csrf, body: 'no round', path: 'a.txt', line: '1' },
      maxRedirects: 0,
    });
    assert.equal(bad.status(), 400);
    assert.match(
      await bad.text(),
      /A comment on a line names a round, a file of its diff and a line number\./,
    );
    assert.equal((await listOwn(t, 'bob.test', 'dev.knotless.comment')).length, 1);
  });

  it('the CLI writes a line comment the appview shows, and reads the one written in the browser', async () => {
    const id = decodeURIComponent(pullPath).split('/').slice(-2).join('/');
    const made = await alice.knotless(
      'pr',
      'comment',
      'alice.test/site',
      id,
      '--round',
      '0',
      '--path',
      'a.txt',
      '--line',
      '2',
      '--body',
      'Two stays.',
    );
    assert.equal(made.code, 0, made.stderr);
    const stored = await listOwn(t, 'alice.test', 'dev.knotless.comment');
    assert.deepEqual([stored[0]!.value['path'], stored[0]!.value['line']], ['a.txt', 2]);
    const refused = await alice.knotless(
      'pr',
      'comment',
      'alice.test/site',
      id,
      '--path',
      'a.txt',
      '--line',
      '2',
      '--body',
      'x',
    );
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /--path and --line go together, with --round\./);
    await waitFor('the CLI comment shown beside its line', async () => {
      await page.goto(`${app.url}${pullPath}?round=0`);
      return (await page.locator('tr.notes', { hasText: 'Two stays.' }).count()) === 1 ? true : undefined;
    });
    const shown = await alice.knotless('pr', 'view', 'alice.test/site', id);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /bob\.test on round 0 at a\.txt:4, .*\n\s+Four is enough\./);
  });

  it('a push to main between loading the pull request and merging it: 409, one sentence, nothing written', async () => {
    await browser.clearCookies();
    await signIn(page, app.url, 'alice.test', t.password);
    await page.goto(`${app.url}${pullPath}`);
    const shownTip = await page.locator('form[action$="/merge"] input[name="base"]').inputValue();
    const moved = await commitBehindThePage(alice, 'alice.test/site');
    assert.notEqual(moved, shownTip);
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Merge pull request' }).click(),
    ]);
    assert.equal(answer.status(), 409);
    assert.match(
      await page.locator('main').innerText(),
      /^409\s+main moved since this page was loaded \(someone pushed\); nothing was written: reload it and merge again\.$/,
    );
    assert.equal(await mainOf(alice, 'alice.test/site'), moved, 'main is where the push left it');
    assert.equal((await listOwn(t, 'alice.test', 'dev.knotless.pull.status')).length, 0);
  });

  it('notifications, and signing out, on PostgreSQL', async () => {
    await browser.clearCookies();
    await signIn(page, app.url, 'alice.test', t.password);
    await page.goto(`${app.url}/-/notifications`);
    const main = await page.locator('main').innerText();
    assert.match(main, /bob\.test opened the pull request “Count to four”/);
    assert.match(main, /bob\.test commented on the pull request “Count to four”/);
    await page.getByRole('button', { name: 'Make a new feed address' }).click();
    const feed = await fetch(await page.locator('.feedurl').innerText());
    assert.equal(feed.status, 200);
    assert.match(await feed.text(), /<title>bob\.test opened the pull request “Count to four”<\/title>/);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('link', { name: 'Sign in' }).waitFor();
    assert.equal(await sealedSessionOf(app, t.dids['alice.test']!), undefined);
  });

  it('keeps serving when PostgreSQL ends its connections (a restart, an administrator)', async () => {
    await page.goto(`${app.url}/alice.test/site`);
    const admin = new pgDriver.Client({ connectionString: database });
    await admin.connect();
    let idle = 0;
    try {
      // Every other connection to the index, the appview's idle pooled ones among them.
      const ended = await admin.query<{ state: string | null }>(
        'select state, pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
      );
      assert.ok(ended.rowCount !== null && ended.rowCount > 0, 'the appview had connections to end');
      idle = ended.rows.filter((r) => r.state === 'idle').length;
    } finally {
      await admin.end();
    }
    // Once the appview has heard each idle connection end (its pool's, and the leader's own), every
    // request is served: none fails on a connection that is gone.
    const heard = () =>
      logged.filter((l) => /an idle PostgreSQL connection ended|leadership: the connection failed/.test(l))
        .length;
    await waitFor(`the appview to hear ${idle} idle connections end`, () =>
      Promise.resolve(heard() >= idle ? true : undefined),
    );
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${app.url}/alice.test/site`);
      const text = await res.text();
      assert.equal(res.status, 200, text);
      assert.match(text, /0 stars/);
    }
  });
});
