// The forge from a browser without JavaScript (progressive enhancement): the appview's sign-in form
// posts and sends the reader on to their PDS; with a session made there (the dev PDS's consent page
// is a script, so bob signs in once with JavaScript and the cookie moves to a browser without it),
// pages read and forms post: bob opens an issue and comments on it, both records in his account.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Cookie, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { launchBrowser } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { listOwn, pdsOf, signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test']);
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

let app: Appview;
let browser: BrowserContext | undefined;
let page: Page;
let cookies: Cookie[];

describe('the forge from a browser without JavaScript', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, work, { 'README.md': '# Site\n\nRead without scripts.\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    // bob forks, so that both repositories are indexed.
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    await waitFor('both repositories indexed', async () => {
      const [a, b] = await Promise.all([
        fetch(`${app.url}/alice.test/site`),
        fetch(`${app.url}/bob.test/site`),
      ]);
      return a.status === 200 && b.status === 200 ? true : undefined;
    });
    // The dev PDS's consent page needs JavaScript: bob signs in once with it.
    const withJs = await launchBrowser();
    try {
      cookies = await signIn(await withJs.newPage(), app.url, 'bob.test', t.password);
    } finally {
      await withJs.close();
    }
    browser = await launchBrowser({ javaScriptEnabled: false });
    page = browser.pages()[0] ?? (await browser.newPage());
  });
  after(async () => {
    await browser?.close();
    await app?.close();
  });

  it("the sign-in form posts without JavaScript and sends the reader to their PDS's authorization page", async () => {
    // This browser runs no page scripts.
    await page.goto('data:text/html,<title>no</title><script>document.title = "yes"</script>');
    assert.equal(await page.title(), 'no');
    await page.goto(`${app.url}/-/signin`);
    await page.getByLabel('Handle').fill('bob.test');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const pds = new URL(await pdsOf(t, 'bob.test'));
    await page.waitForURL((u) => u.host === pds.host);
  });

  it('a reader the appview has never indexed (carol.test, no knotless records) signs in too', async () => {
    const withJs = await launchBrowser();
    try {
      const carol = await signIn(await withJs.newPage(), app.url, 'carol.test', t.password);
      assert.equal(carol.length, 1);
    } finally {
      await withJs.close();
    }
  });

  it("with bob's session, a page reads and the issue and comment forms post; the records are his", async () => {
    await browser!.addCookies(cookies);
    await page.goto(`${app.url}/alice.test/site`);
    assert.match(await page.locator('main').innerText(), /Read without scripts\./);
    await page.getByText('Signed in as bob.test').waitFor();
    await page.goto(`${app.url}/alice.test/site/issues`);
    await page.getByLabel('Title').fill('Works without scripts');
    await page.getByLabel('Description').fill('Posted by a plain form.');
    await page.getByRole('button', { name: 'Open issue' }).click();
    await page.getByRole('heading', { name: 'Works without scripts' }).waitFor();
    await page.getByLabel('Comment').fill('And so does this comment.');
    await page.getByRole('button', { name: 'Comment' }).click();
    await page.getByText('And so does this comment.').waitFor();
    const issues = await listOwn(t, 'bob.test', 'dev.knotless.issue');
    assert.deepEqual(
      issues.map((r) => r.value['title']),
      ['Works without scripts'],
    );
    const comments = await listOwn(t, 'bob.test', 'dev.knotless.comment');
    assert.deepEqual(
      comments.map((r) => r.value['body']),
      ['And so does this comment.'],
    );
  });
});
