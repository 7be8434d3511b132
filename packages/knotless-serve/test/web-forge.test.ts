// The forge from the browser, end to end on the dev network in Chromium: bob signs in through his
// PDS's consent page, opens an issue on alice's repository and comments, opens a pull request from
// his fork's branch on the compare page; alice signs in and merges it. Every record is read back
// from its author's own account; refusals (bob merging, a form without its token, one reader's
// cookie with another's token) are one sentence with their status; signing out revokes the tokens
// at the PDS. Every new page passes the CSP checks and axe-core (browser-kit.ts).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Cookie, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { WebSessions } from '../src/auth/web-sessions.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { commitBehindThePage, listOwn, mainOf, pdsOf, sealedSessionOf, signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

let app: Appview;
let pg: PgServer | undefined;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let cookies: Record<'alice' | 'bob', Cookie[]>;
let featureHead: string;
let pullPath: string;
let issuePath: string;

/** Acts as `who`: only their session cookie in the browser. */
async function as(who: 'alice' | 'bob'): Promise<void> {
  await browser.clearCookies();
  await browser.addCookies(cookies[who]);
}

/** The CSRF token of the signed-in reader, from the sign-out form every page carries. */
async function csrfOnPage(): Promise<string> {
  return page.locator('form[action="/-/signout"] input[name="csrf"]').inputValue();
}

async function visit(where: string, what: string): Promise<void> {
  await page.goto(`${app.url}${where}`);
  await checkPage(page, cspErrors, what);
}

describe('the forge on the web, signed in with atproto OAuth', () => {
  before(async () => {
    await t.ready;
    // SQLite by default; KNOTLESS_TEST_INDEX=postgres runs the same flow on PostgreSQL
    // (web-forge-stars.test.ts always does, for sessions, notifications, stars and line comments).
    if (process.env['KNOTLESS_TEST_INDEX'] === 'postgres') pg = await startPostgres();
    app = await appviewOn(t, pg === undefined ? ':memory:' : await pg.createDatabase('webforge'));
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, work, { 'README.md': '# Site\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const clone = bob.dir();
    await bob.ok(clone, 'clone', '-q', 'knotless://bob.test/site', '.');
    await bob.ok(clone, 'checkout', '-q', '-b', 'feature');
    featureHead = await commitFiles(bob, clone, { 'b.txt': 'bee\n' }, 'feature: add b');
    await bob.ok(clone, 'push', '-q', 'origin', 'feature');
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    // The appview has bob's branch once its compare page offers the pull request.
    await waitFor('the fork mirrored', async () => {
      const res = await fetch(`${app.url}/bob.test/site/compare/main...feature`);
      return res.status === 200 && (await res.text()).includes('Open a pull request') ? true : undefined;
    });
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await pg?.stop();
  });

  it('signs bob in through his PDS, and the sign-in page and home page pass axe', async () => {
    await visit('/-/signin', 'sign-in page');
    const bobs = await signIn(page, app.url, 'bob.test', t.password);
    await checkPage(page, cspErrors, 'home, signed in');
    await page.getByText('Signed in as').waitFor();
    cookies = { bob: bobs, alice: [] };
    const c = bobs.find((x) => x.name === 'knotless_session')!;
    assert.equal(c.httpOnly, true);
    assert.equal(c.sameSite, 'Lax');
  });

  it("bob opens an issue on alice's repository and comments on it; both records are in his account", async () => {
    await visit('/alice.test/site/issues', 'issues with the new issue form');
    await page.getByLabel('Title').fill('The site has no b');
    await page.getByLabel('Description').fill('It should.');
    await page.getByRole('button', { name: 'Open issue' }).click();
    await page.getByRole('heading', { name: 'The site has no b' }).waitFor();
    issuePath = new URL(page.url()).pathname;
    await checkPage(page, cspErrors, 'issue page with comment form');
    await page.getByLabel('Comment').fill('I have a branch for it.');
    await page.getByRole('button', { name: 'Comment' }).click();
    await page.getByText('I have a branch for it.').waitFor();
    const issues = await listOwn(t, 'bob.test', 'dev.knotless.issue');
    assert.equal(issues.length, 1);
    assert.equal(issues[0]!.value['title'], 'The site has no b');
    assert.match(String(issues[0]!.value['repo']), /^at:\/\/did:plc:[a-z0-9]+\/dev\.knotless\.repo\/site$/);
    const comments = await listOwn(t, 'bob.test', 'dev.knotless.comment');
    assert.deepEqual(
      comments.map((c) => c.value['body']),
      ['I have a branch for it.'],
    );
    assert.equal((await listOwn(t, 'alice.test', 'dev.knotless.issue')).length, 0);
  });

  it("bob opens a pull request from his fork's branch on the compare page; its pack is in his PDS", async () => {
    await visit('/bob.test/site/compare/main...feature', 'compare page with the pull request form');
    await page.getByLabel('Title').fill('Add b');
    await page.getByRole('button', { name: 'Open pull request' }).click();
    await page.getByRole('heading', { name: 'Add b' }).waitFor();
    pullPath = new URL(page.url()).pathname;
    assert.match(decodeURIComponent(pullPath), /^\/alice\.test\/site\/pulls\/did:plc:[a-z0-9]+\/[a-z0-9]+$/);
    await checkPage(page, cspErrors, 'pull request page, signed in as the author');
    // No merge button for bob: he is not the owner.
    assert.equal(await page.getByRole('button', { name: 'Merge pull request' }).count(), 0);
    const pulls = await listOwn(t, 'bob.test', 'dev.knotless.pull');
    assert.equal(pulls.length, 1);
    const rounds = pulls[0]!.value['rounds'] as { head: string; pack: { ref: { $link: string } } }[];
    assert.equal(rounds[0]!.head, featureHead);
    const blob = await fetch(
      `${await pdsOf(t, 'bob.test')}/xrpc/com.atproto.sync.getBlob?did=${t.dids['bob.test']}&cid=${rounds[0]!.pack.ref.$link}`,
    );
    assert.equal(blob.status, 200, "the round's pack is a blob in bob's account");
  });

  it("refuses bob's merge, a form without its token, and one reader's token with another's cookie", async () => {
    const csrf = await csrfOnPage();
    const merge = await page.request.post(`${app.url}${pullPath}/merge`, {
      form: { csrf, head: featureHead },
      maxRedirects: 0,
    });
    assert.equal(merge.status(), 403);
    assert.match(await merge.text(), /Only alice\.test\/site&#39;s owner can merge it; you are bob\.test\./);
    const noToken = await page.request.post(`${app.url}${issuePath}/comment`, {
      form: { body: 'sneaky' },
      maxRedirects: 0,
    });
    assert.equal(noToken.status(), 403);
    assert.match(await noToken.text(), /did not come from a page of this site/);
    const signedOut = await fetch(`${app.url}${issuePath}/comment`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ body: 'anon', csrf }).toString(),
      redirect: 'manual',
    });
    assert.equal(signedOut.status, 401);
    assert.match(await signedOut.text(), /Sign in to do that\./);
    // Another reader's token (alice's session, started as an operator with the database could; a
    // token as long as bob's) with bob's cookie: a token belongs to its session.
    const alices = await new WebSessions(app.index.db).create(t.dids['alice.test']!, 'alice.test');
    const theirs = await fetch(`${app.url}${issuePath}`, {
      headers: { cookie: `knotless_session=${alices}` },
    });
    const alicesToken = /name="csrf" value="([^"]+)"/.exec(await theirs.text())?.[1];
    assert.ok(alicesToken !== undefined && alicesToken !== csrf, "alice's page carries her own token");
    assert.equal(alicesToken.length, csrf.length);
    const crossed = await page.request.post(`${app.url}${issuePath}/comment`, {
      form: { body: 'crossed', csrf: alicesToken },
      maxRedirects: 0,
    });
    assert.equal(crossed.status(), 403);
    assert.match(await crossed.text(), /did not come from a page of this site/);
    assert.equal((await listOwn(t, 'bob.test', 'dev.knotless.comment')).length, 1);
  });

  it("alice signs in and merges; her main holds bob's commit and the merged status is in her account", async () => {
    await browser.clearCookies();
    await page.goto(`${app.url}/-/signin`);
    cookies.alice = await signIn(page, app.url, 'alice.test', t.password);
    await visit(pullPath, 'pull request page, signed in as the owner');
    // bob's CSRF token does not work with alice's cookie: a token belongs to its session.
    await as('bob');
    await page.goto(`${app.url}${pullPath}`);
    const bobsToken = await csrfOnPage();
    await as('alice');
    const crossed = await page.request.post(`${app.url}${pullPath}/merge`, {
      form: { csrf: bobsToken, head: featureHead },
      maxRedirects: 0,
    });
    assert.equal(crossed.status(), 403);
    await page.goto(`${app.url}${pullPath}`);
    await page.getByRole('button', { name: 'Merge pull request' }).click();
    await page.locator('.st-merged').first().waitFor();
    await checkPage(page, cspErrors, 'merged pull request');
    const remote = await alice.ok(alice.dir(), 'ls-remote', 'knotless://alice.test/site', 'refs/heads/main');
    assert.equal(remote.split('\t')[0], featureHead, "a fast-forward: main is bob's commit");
    const statuses = await listOwn(t, 'alice.test', 'dev.knotless.pull.status');
    assert.equal(statuses.length, 1);
    assert.equal(statuses[0]!.value['status'], 'merged');
    assert.equal(statuses[0]!.value['merged'], featureHead);
    assert.equal((await listOwn(t, 'bob.test', 'dev.knotless.pull.status')).length, 0);
  });

  it("close and reopen under the authority rule (the owner's close and the author's withdrawal final against the other), and the owner's labels, each in its writer's account", async () => {
    await as('bob');
    await page.goto(`${app.url}${issuePath}`);
    assert.equal(await page.getByLabel('Labels').count(), 0, 'only the owner is offered labels');
    const labels = await page.request.post(`${app.url}${issuePath}/labels`, {
      form: { csrf: await csrfOnPage(), labels: 'mine' },
      maxRedirects: 0,
    });
    assert.equal(labels.status(), 403);
    assert.match(
      await labels.text(),
      /Only alice\.test\/site&#39;s owner can label its issues; you are bob\.test\./,
    );
    await page.getByRole('button', { name: 'Close' }).click();
    await page.locator('.st-closed').first().waitFor();
    const bobs = await listOwn(t, 'bob.test', 'dev.knotless.issue.state');
    assert.deepEqual(
      bobs.map((r) => r.value['state']),
      ['closed'],
    );
    await as('alice');
    await page.goto(`${app.url}${issuePath}`);
    await page.getByLabel('Labels').fill('bug, docs');
    await page.getByRole('button', { name: 'Save labels' }).click();
    await page.locator('span.pill', { hasText: 'docs' }).first().waitFor();
    // The owner's labels keep the author's withdrawal, and her reopen cannot undo it.
    assert.ok((await page.locator('.st-closed').count()) > 0, 'still closed');
    const state = async (value: string) =>
      page.request.post(`${app.url}${issuePath}/state`, {
        form: { csrf: await csrfOnPage(), state: value },
        maxRedirects: 0,
      });
    const overAuthor = await state('open');
    assert.equal(overAuthor.status(), 403);
    assert.match(await overAuthor.text(), /Its author, bob\.test, closed \S+; only they can reopen it\./);
    await as('bob');
    await page.goto(`${app.url}${issuePath}`);
    await page.getByRole('button', { name: 'Reopen' }).click();
    await page.locator('.st-open').first().waitFor();
    await as('alice');
    await page.goto(`${app.url}${issuePath}`);
    await page.getByRole('button', { name: 'Close' }).click();
    await page.locator('.st-closed').first().waitFor();
    await checkPage(page, cspErrors, 'issue page, signed in as the owner');
    // The owner's close is final against the author.
    await as('bob');
    await page.goto(`${app.url}${issuePath}`);
    const overOwner = await state('open');
    assert.equal(overOwner.status(), 403);
    assert.match(
      await overOwner.text(),
      /alice\.test\/site&#39;s owner closed \S+; only they can reopen it\./,
    );
    const alices = await listOwn(t, 'alice.test', 'dev.knotless.issue.state');
    assert.deepEqual(alices.map((r) => r.value['state']).sort(), ['closed', 'open']);
    for (const r of alices) assert.deepEqual(r.value['labels'], ['bug', 'docs']);
    assert.deepEqual(
      (await listOwn(t, 'bob.test', 'dev.knotless.issue.state')).map((r) => r.value['state']).sort(),
      ['closed', 'open'],
    );
  });

  it('a label holding a comma stays one label through the labels form, written in double quotes; a quote left open is refused', async () => {
    await as('alice');
    await page.goto(`${app.url}${issuePath}`);
    await page.getByLabel('Labels').fill('"needs review, urgent", docs');
    await page.getByRole('button', { name: 'Save labels' }).click();
    await page.locator('span.pill', { hasText: 'needs review, urgent' }).waitFor();
    assert.equal(await page.getByLabel('Labels').inputValue(), '"needs review, urgent", docs');
    const latest = async () => {
      const own = await listOwn(t, 'alice.test', 'dev.knotless.issue.state');
      return own.reduce((a, b) => (b.uri > a.uri ? b : a)).value['labels'];
    };
    assert.deepEqual(await latest(), ['needs review, urgent', 'docs']);
    // Saved again as the form shows it, the labels are the same: the label is not split.
    await page.getByLabel('Labels').fill(`${await page.getByLabel('Labels').inputValue()}, p1`);
    await page.getByRole('button', { name: 'Save labels' }).click();
    await page.locator('span.pill', { hasText: 'p1' }).waitFor();
    assert.deepEqual(await latest(), ['needs review, urgent', 'docs', 'p1']);
    assert.equal(await page.locator('span.pill', { hasText: 'urgent' }).count(), 1);
    const open = await page.request.post(`${app.url}${issuePath}/labels`, {
      form: { csrf: await csrfOnPage(), labels: '"needs review, urgent' },
      maxRedirects: 0,
    });
    assert.equal(open.status(), 400);
    assert.match(await open.text(), /A quoted label needs its closing double quote/);
    assert.doesNotMatch(await open.text(), /at parseLabelList|\.ts:\d+/);
  });

  it('alice edits a file in the browser and commits it to main, as herself; bob may not', async () => {
    await as('bob');
    const refused = await page.goto(`${app.url}/alice.test/site/edit/main/README.md`);
    assert.equal(refused?.status(), 403);
    assert.match(
      await page.locator('main').innerText(),
      /Only alice\.test can commit to alice\.test\/site; you are bob\.test\./,
    );
    await as('alice');
    await visit('/alice.test/site/blob/main/README.md', 'a file, signed in as its owner');
    await page.getByRole('link', { name: 'Edit' }).click();
    await checkPage(page, cspErrors, 'the editor');
    await page.getByLabel('README.md').fill('# Site\n\nEdited in the browser.\n');
    await page.getByLabel('Commit message').fill('Say where it was edited');
    await page.getByRole('button', { name: 'Commit to main' }).click();
    await page.waitForURL(/\/commits\/main$/);
    const clone = alice.dir();
    await alice.ok(clone, 'clone', '-q', 'knotless://alice.test/site', '.');
    assert.equal(
      fs.readFileSync(path.join(clone, 'README.md'), 'utf8'),
      '# Site\n\nEdited in the browser.\n',
    );
    const who = await alice.ok(clone, 'log', '-1', '--format=%s|%an <%ae>|%cn|%P');
    assert.equal(
      who.trim(),
      `Say where it was edited|alice.test <${t.dids['alice.test']!}>|alice.test|${featureHead}`,
    );
  });

  it('a push landing between opening the editor and committing: 409, one sentence, the push kept', async () => {
    await as('alice');
    await page.goto(`${app.url}/alice.test/site/edit/main/README.md`);
    await page.getByLabel('README.md').fill('# Site\n\nA stale edit.\n');
    const moved = await commitBehindThePage(alice, 'alice.test/site');
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Commit to main' }).click(),
    ]);
    assert.equal(answer.status(), 409);
    assert.match(
      await page.locator('main').innerText(),
      /^409\s+main moved since this file was opened \(someone pushed\); open it again and redo the edit\.$/,
    );
    assert.equal(await mainOf(alice, 'alice.test/site'), moved, 'nothing written over the push');
  });

  it('notifications: the header counts them, the page lists them, the private feed serves them', async () => {
    await as('alice');
    await page.goto(`${app.url}/`);
    const count = Number(await page.locator('header a[href="/-/notifications"] .pill').innerText());
    assert.ok(count >= 3, `alice has unseen notifications (${count})`);
    await visit('/-/notifications', 'notifications page');
    const main = await page.locator('main').innerText();
    assert.match(main, /bob\.test opened the pull request “Add b”/);
    assert.match(main, /bob\.test opened the issue “The site has no b”/);
    assert.match(main, /bob\.test commented on the issue “The site has no b”/);
    await page.goto(`${app.url}/`);
    assert.equal(await page.locator('header a[href="/-/notifications"] .pill').count(), 0, 'seen: no count');
    await page.goto(`${app.url}/-/notifications`);
    await page.getByRole('button', { name: 'Make a new feed address' }).click();
    const feedUrl = await page.locator('.feedurl').innerText();
    assert.match(feedUrl, /\/-\/notifications\.atom\?token=[A-Za-z0-9_-]{32}$/);
    const feed = await fetch(feedUrl);
    assert.equal(feed.status, 200);
    assert.match(await feed.text(), /<title>bob\.test opened the pull request “Add b”<\/title>/);
    assert.equal((await fetch(feedUrl.replace(/token=.*/, `token=${'A'.repeat(32)}`))).status, 404);
    // A mention in an issue's body notifies the handle mentioned, though the issue is not on its repository.
    await page.goto(`${app.url}/alice.test/site/issues`);
    await page.getByLabel('Title').fill('Who reviews the docs?');
    await page.getByLabel('Description').fill('@bob.test could you?');
    await page.getByRole('button', { name: 'Open issue' }).click();
    await page.getByRole('heading', { name: 'Who reviews the docs?' }).waitFor();
    await as('bob');
    await page.goto(`${app.url}/-/notifications`);
    const bobs = await page.locator('main').innerText();
    assert.match(bobs, /alice\.test marked your issue “The site has no b” open/);
    assert.match(bobs, /alice\.test mentioned you on the issue “Who reviews the docs\?”/);
  });

  it("signing out revokes the tokens: a kept copy of bob's session is refused by his PDS", async () => {
    await as('bob');
    await page.goto(`${app.url}${issuePath}`);
    const kept = await sealedSessionOf(app, t.dids['bob.test']!);
    assert.ok(kept !== undefined, "bob's OAuth session is stored");
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('link', { name: 'Sign in' }).waitFor();
    assert.equal(await sealedSessionOf(app, t.dids['bob.test']!), undefined, 'nothing kept after sign-out');
    // An operator who copied the session before sign-out puts it back, with a browser session on it.
    const cookie = await kept.restore();
    await browser.clearCookies();
    await browser.addCookies([{ ...cookies.bob[0]!, value: cookie.value }]);
    await page.goto(`${app.url}${issuePath}`);
    await page.getByLabel('Comment').fill('written with revoked tokens');
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Comment' }).click(),
    ]);
    assert.equal(
      (await page.getByRole('alert').innerText()).trim(),
      'Your sign-in has expired or was revoked; sign in again.',
    );
    assert.equal(await page.getByLabel('Comment').inputValue(), 'written with revoked tokens');
    assert.equal(answer.status(), 401);
    assert.equal((await listOwn(t, 'bob.test', 'dev.knotless.comment')).length, 1);
  });
});
