// The web sign-in is bound to the browser that began it: a callback URL bob's sign-in produced,
// opened in any other browser (plain HTTP without his cookies, or alice's Chromium), signs nobody
// in and asks nothing of the PDS; in bob's own browser the same URL signs him in.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Cookie, Page } from 'playwright-core';
import { ISSUE } from 'knotless-core/forge/records';
import { useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { signInBinding } from '../src/auth/web-sessions.ts';
import { launchBrowser } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { listOwn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const bob = useGitUser(t, 'bob.test');

let app: Appview;
let bobBrowser: BrowserContext;
let aliceBrowser: BrowserContext;
let bobPage: Page;
/** The callback URL bob's PDS sent his browser to, which his browser never opened. */
let callback = '';

/** Whether the appview holds OAuth tokens for an account (only a finished callback stores them). */
async function tokensHeld(did: string): Promise<boolean> {
  const row = await app.index.db
    .selectFrom('oauth_sessions')
    .select('did')
    .where('did', '=', did)
    .executeTakeFirst();
  return row !== undefined;
}

describe('the sign-in is bound to the browser that began it', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    // The appview signs in accounts it has indexed: bob's first repository makes him known.
    assert.equal((await bob.knotless('repo', 'create', 'site')).code, 0);
    await waitFor('bob indexed', async () => await app.index.owner('bob.test'));
    bobBrowser = await launchBrowser();
    aliceBrowser = await launchBrowser();
    bobPage = await bobBrowser.newPage();
    // Bob signs in up to his PDS's approval and stops before his browser reaches the callback.
    await bobPage.goto(`${app.url}/-/signin`);
    await bobPage.getByLabel('Handle').fill('bob.test');
    await bobPage.getByRole('button', { name: 'Sign in' }).click();
    await bobPage
      .waitForURL((u) => !u.href.startsWith(app.url))
      .catch(async (err: unknown) => {
        throw new Error(`${String(err)}: ${await bobPage.locator('body').innerText()}`);
      });
    await bobPage.locator('input[name="password"]').fill(t.password);
    await bobPage.getByRole('button', { name: 'Sign in' }).click();
    // After Authorize, the PDS's page navigates to its own /oauth/authorize/redirect, which answers
    // with a 303 to the callback. A route sees only the first URL of a redirect chain, so that
    // request is the one held: it is sent from here as the browser sent it (the PDS checks the
    // Sec-Fetch headers and the referrer of a navigation from its page) and the 303 is read
    // instead of followed, so bob's browser stops before the callback.
    const reached = new Promise<string>((resolve, reject) => {
      void bobPage.route(
        (u) => u.pathname === '/oauth/authorize/redirect',
        async (route) => {
          const request = route.request();
          const response = await route.fetch({
            maxRedirects: 0,
            headers: {
              ...(await request.allHeaders()),
              'sec-fetch-site': 'same-origin',
              'sec-fetch-mode': 'navigate',
              'sec-fetch-dest': 'document',
            },
          });
          const location = response.headers()['location'] ?? '';
          if (response.status() !== 303 || !location.includes('/oauth/callback?')) {
            reject(new Error(`the PDS answered ${response.status()}: ${await response.text()}`));
            return route.fulfill({ response });
          }
          resolve(new URL(location, request.url()).href);
          return route.fulfill({ status: 200, body: 'stopped before the callback' });
        },
      );
    });
    await bobPage.getByRole('button', { name: 'Authorize' }).click();
    callback = await reached;
    await bobPage.unrouteAll({ behavior: 'ignoreErrors' });
  });
  after(async () => {
    await bobPage?.close();
    await bobBrowser?.close();
    await aliceBrowser?.close();
    await app?.close();
  });

  /** Bob's browser's sign-in cookies (one per sign-in it began), as the browser holds them. */
  async function bobSignIns(): Promise<Cookie[]> {
    return (await bobBrowser.cookies(`${app.url}/oauth/callback`)).filter((c) =>
      c.name.startsWith('knotless_signin_'),
    );
  }

  it('refuses the callback over HTTP without the cookie the sign-in set, or with a wrong nonce in it', async () => {
    assert.match(callback, /\/oauth\/callback\?.*code=/);
    const [mine] = await bobSignIns();
    assert.ok(mine !== undefined, 'the sign-in set its cookie');
    const forged = `${mine.name}=${'A'.repeat(43)}`;
    for (const headers of [{}, { cookie: forged }, { cookie: `knotless_signin=${mine.value}` }]) {
      const res = await fetch(callback, { redirect: 'manual', headers });
      assert.equal(res.status, 403, JSON.stringify(headers));
      const cookies = res.headers.getSetCookie();
      assert.deepEqual(cookies, [], 'nothing set, nothing cleared');
      const body = await res.text();
      assert.match(body, /not begun in this browser/);
      assert.match(body, /href="\/-\/signin"/);
    }
    assert.equal(await tokensHeld(t.dids['bob.test']!), false, 'no token was asked for bob');
  });

  it('sets the sign-in cookie HttpOnly, SameSite=Lax, only for the callback, and Secure on https', async () => {
    const [mine] = await bobSignIns();
    assert.equal(mine?.httpOnly, true);
    assert.equal(mine?.sameSite, 'Lax');
    assert.equal(mine?.path, '/oauth/callback');
    assert.equal(mine?.secure, false, 'the test appview is plain http');
    assert.match(signInBinding(true).cookie, /; HttpOnly; SameSite=Lax; Max-Age=3600; Secure$/);
  });

  it("does not sign alice's browser in as bob when a page sends it to bob's callback", async () => {
    const page = await aliceBrowser.newPage();
    // A link on a page alice visits, elsewhere, leads her browser to bob's callback.
    await page.setContent(`<a href="${callback}">a cat picture</a>`);
    const [res] = await Promise.all([
      page.waitForResponse((r) => r.url() === callback),
      page.getByRole('link', { name: 'a cat picture' }).click(),
    ]);
    assert.equal(res.status(), 403);
    await page.getByText('not begun in this browser').waitFor();
    await page.getByRole('link', { name: 'sign in again' }).waitFor();
    assert.equal(await page.getByText('Signed in as').count(), 0);
    const jar = await aliceBrowser.cookies(app.url);
    assert.deepEqual(
      jar.filter((c) => c.name === 'knotless_session'),
      [],
    );
    await page.goto(app.url);
    await page.locator('header a.signin').waitFor();
    assert.equal(await page.getByText('Signed in as').count(), 0);
    // What she writes next lands nowhere: her browser acts for nobody.
    const write = await page.request.post(`${app.url}/bob.test/site/issues/new`, {
      form: { title: 'written by alice', csrf: 'none' },
      maxRedirects: 0,
    });
    assert.equal(write.status(), 401);
    assert.deepEqual(await listOwn(t, 'bob.test', ISSUE), []);
    assert.equal(await tokensHeld(t.dids['bob.test']!), false, 'no token was asked for bob');
    await page.close();
  });

  it('keeps a sign-in begun in another of his tabs when bob finishes this one', async () => {
    const other = await bobBrowser.newPage();
    await other.goto(`${app.url}/-/signin`);
    await other.getByLabel('Handle').fill('bob.test');
    await other.getByRole('button', { name: 'Sign in' }).click();
    await other.waitForURL((u) => !u.href.startsWith(app.url));
    await other.close();
    assert.equal((await bobSignIns()).length, 2, 'each sign-in has its own cookie');
  });

  it("signs bob in when his own browser opens the same callback, and clears that sign-in's cookie", async () => {
    const before = (await bobSignIns()).map((c) => c.name);
    await bobPage.goto(callback);
    await bobPage.getByText('Signed in as bob.test').waitFor();
    assert.equal(await tokensHeld(t.dids['bob.test']!), true);
    const after = (await bobSignIns()).map((c) => c.name);
    assert.equal(after.length, 1, "only the other tab's sign-in is left");
    assert.ok(before.includes(after[0]!));
    const jar = await bobBrowser.cookies(app.url);
    assert.equal(jar.filter((c) => c.name === 'knotless_session').length, 1);
  });
});
