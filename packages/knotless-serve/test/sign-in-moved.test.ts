// A reader signed in on the web whose account then moves to another PDS (`knotless dev migrate`):
// the OAuth session the appview holds was granted by the old PDS and no longer holds. Their next
// write says so in one sentence naming the move, shows the form again with what they typed, links
// to signing in again, and the header stops claiming a sign-in; nothing is written anywhere.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { COMMENT, ISSUE } from 'knotless-core/forge/records';
import { knotless } from '../../knotless/test/helpers/cli.ts';
import { useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { launchBrowser } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test'], { pdses: 2 });
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

let app: Appview;
let browser: BrowserContext;
let page: Page;

/** Records of `collection` in alice's account on PDS `pds`, read there directly. */
async function aliceRecords(pds: string, collection: string): Promise<unknown[]> {
  const q = new URLSearchParams({ repo: t.dids['alice.test']!, collection });
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.listRecords?${q}`);
  if (res.status !== 200) return [];
  return ((await res.json()) as { records: unknown[] }).records;
}

describe('a web sign-in whose account moved to another PDS', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal(t.pdsOf['alice.test'], t.net.pdses[0]!.url);
    assert.equal((await bob.knotless('repo', 'create', 'site')).code, 0);
    const opened = await bob.knotless('issue', 'create', 'bob.test/site', '--title', 'a question');
    assert.equal(opened.code, 0, opened.stderr);
    // The appview signs in accounts it can find: alice's own repository makes her known.
    assert.equal((await alice.knotless('repo', 'create', 'notes')).code, 0);
    for (const h of ['alice.test', 'bob.test'])
      await waitFor(`${h} indexed`, async () => await app.index.owner(h));
    browser = await launchBrowser();
    page = await browser.newPage();
    await signIn(page, app.url, 'alice.test', t.password);
    // Alice starts typing an issue on bob's repository; meanwhile her account moves.
    await page.goto(`${app.url}/bob.test/site/issues`);
    await page.getByLabel('Title').fill('the move ate my issue');
    await page.getByLabel('Description').fill('line one\nline two <b>not bold</b>');
    const moved = await knotless(['dev', 'migrate', 'alice.test', '--dir', t.net.dir], {
      env: { ...alice.env, KNOTLESS_DEV_PASSWORD: t.password },
    });
    assert.equal(moved.code, 0, moved.stderr);
    assert.equal((await t.net.pdsOf(t.dids['alice.test']!)).url, t.net.pdses[1]!.url);
  });
  after(async () => {
    await page?.close();
    await browser?.close();
    await app?.close();
  });

  it('the next write says the account moved, keeps the typed text, links to sign in, and ends the sign-in', async () => {
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Open issue' }).click(),
    ]);
    const shown = await page.locator('body').innerText();
    assert.equal(res.status(), 401, shown);
    const [from, to] = t.net.pdses.map((p) => new URL(p.url).origin);
    const sentence = `alice.test moved from ${from} to ${to} since you signed in here; sign in again to write there.`;
    assert.ok(shown.includes(sentence), shown);
    assert.equal((await page.getByRole('alert').innerText()).trim(), sentence);
    await page.getByRole('link', { name: 'Sign in again' }).waitFor();
    assert.equal(await page.getByLabel('Title').inputValue(), 'the move ate my issue');
    assert.equal(await page.getByLabel('Description').inputValue(), 'line one\nline two <b>not bold</b>');
    assert.equal(await page.getByText('Signed in as').count(), 0);
    const jar = await browser.cookies(app.url);
    assert.deepEqual(
      jar.filter((c) => c.name === 'knotless_session'),
      [],
      'the browser session is cleared',
    );
    await page.goto(`${app.url}/bob.test/site/issues`);
    await page.locator('header a.signin').waitFor();
    assert.equal(await page.getByText('Signed in as').count(), 0);
    for (const pds of t.net.pdses) assert.deepEqual(await aliceRecords(pds.url, ISSUE), []);
  });

  it('signing in again, on the new PDS, writes there', async () => {
    await signIn(page, app.url, 'alice.test', t.password);
    await page.goto(`${app.url}/bob.test/site/issues`);
    await page.getByLabel('Title').fill('after signing in again');
    await page.getByRole('button', { name: 'Open issue' }).click();
    await page.getByRole('heading', { name: 'after signing in again' }).waitFor();
    assert.equal((await aliceRecords(t.net.pdses[1]!.url, ISSUE)).length, 1);
  });

  it('a comment whose sign-in no longer holds, with no move: the sentence says so, the comment is kept', async () => {
    await page.goto(`${app.url}/bob.test/site/issues`);
    await page.getByRole('link', { name: 'a question' }).click();
    await page.getByLabel('Comment').fill('a reply\nthat must not be lost');
    // The appview's stored grant for alice is gone, as when another request found it refused by
    // her PDS and the library dropped it: her browser session is left behind it.
    await app.index.db.deleteFrom('oauth_sessions').where('did', '=', t.dids['alice.test']!).execute();
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Comment' }).click(),
    ]);
    const shown = await page.locator('body').innerText();
    assert.equal(res.status(), 401, shown);
    const sentence = 'Your sign-in has expired or was revoked; sign in again.';
    assert.ok(shown.includes(sentence), shown);
    assert.equal((await page.getByRole('alert').innerText()).trim(), sentence);
    await page.getByRole('link', { name: 'Sign in again' }).waitFor();
    assert.equal(await page.getByLabel('Comment').inputValue(), 'a reply\nthat must not be lost');
    assert.equal(await page.getByText('Signed in as').count(), 0);
    assert.deepEqual(
      (await browser.cookies(app.url)).filter((c) => c.name === 'knotless_session'),
      [],
    );
    for (const pds of t.net.pdses) assert.deepEqual(await aliceRecords(pds.url, COMMENT), []);
  });
});
