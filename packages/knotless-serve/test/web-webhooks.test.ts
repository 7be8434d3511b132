// A repository's webhooks from the browser, in Chromium on the dev network: alice signs in through
// her PDS, adds a webhook on her repository's settings page (its secret shown once), sends a test,
// reads the delivery log, redelivers a push and removes the webhook; a real receiver on loopback
// checks every signature. Bob, and a signed-out reader, cannot see or change her webhooks.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { signIn } from './web-forge-kit.ts';
import { signatureHolds, startReceiver, type Receiver } from './webhook-receiver.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test');
let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let rx: Receiver;
let work = '';

const settings = () => `${app.url}/alice.test/site/settings/webhooks`;

describe('webhooks from the settings page', () => {
  before(async () => {
    await t.ready;
    rx = await startReceiver();
    app = await appviewOn(t, ':memory:', undefined, { webhookTimeoutMs: 5000, webhookRetryMs: 200 });
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, work, { 'a.txt': 'one\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await waitFor('the repository on its page', async () =>
      (await fetch(`${app.url}/alice.test/site`)).status === 200 ? true : undefined,
    );
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    await signIn(page, app.url, 'alice.test', t.password);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await rx?.close();
  });

  it('alice adds a webhook, its secret shown once; a test ping arrives signed and is in the log', async () => {
    await page.goto(`${app.url}/alice.test/site`);
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('heading', { name: 'Webhooks' }).waitFor();
    await checkPage(page, cspErrors, 'webhook settings, none yet');

    // Refused: not http(s), one sentence, nothing added.
    await page.getByLabel("Receiver's address").fill('ftp://example.com/hook');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await page.getByRole('alert').getByText('http or https only').waitFor();
    assert.deepEqual(await app.index.webhooks.list(t.dids['alice.test']!, 'site'), []);

    await page.getByLabel("Receiver's address").fill(rx.url);
    await page.getByRole('button', { name: 'Add webhook' }).click();
    const secret = await page.getByLabel('Secret', { exact: true }).inputValue();
    assert.match(secret, /^[0-9a-f]{64}$/);
    await checkPage(page, cspErrors, 'webhook settings, a webhook just added');
    await page.goto(settings());
    assert.ok(!(await page.content()).includes(secret), 'the secret is not shown again');
    await page.getByRole('heading', { name: rx.url }).waitFor();

    await page.getByRole('button', { name: 'Send a test' }).click();
    const ping = await waitFor('the test ping', () =>
      Promise.resolve(rx.received.find((r) => r.headers['x-knotless-event'] === 'ping')),
    );
    assert.ok(signatureHolds(ping, secret));
    await waitFor('the log to show the ping delivered', async () => {
      await page.goto(settings());
      const row = page.getByRole('row').filter({ hasText: 'ping' });
      return (await row.count()) === 1 && /delivered.*204/s.test(await row.innerText()) ? true : undefined;
    });
    await checkPage(page, cspErrors, 'webhook settings with a delivery log');
  });

  it('a push arrives, is logged, and Redeliver posts the same delivery again', async () => {
    await commitFiles(alice, work, { 'a.txt': 'two\n' }, 'second');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const pushes = () => rx.received.filter((r) => r.headers['x-knotless-event'] === 'push');
    const first = await waitFor('the push', () => Promise.resolve(pushes()[0]));
    await waitFor('the log to show the push', async () => {
      await page.goto(settings());
      const row = page.getByRole('row').filter({ hasText: 'push' });
      return (await row.count()) === 1 && /delivered/.test(await row.innerText()) ? true : undefined;
    });
    await page
      .getByRole('row')
      .filter({ hasText: 'push' })
      .getByRole('button', { name: 'Redeliver' })
      .click();
    const again = await waitFor('the redelivery', () => Promise.resolve(pushes()[1]));
    assert.equal(again.headers['x-knotless-delivery'], first.headers['x-knotless-delivery']);
    assert.equal(again.body, first.body);
    assert.equal(again.headers['x-knotless-signature-256'], first.headers['x-knotless-signature-256']);
  });

  it("nobody else sees or changes alice's webhooks", async () => {
    const signedOut = await fetch(settings());
    assert.equal(signedOut.status, 401);
    const bobContext = await launchBrowser();
    try {
      const { page: bobPage } = await watchedPage(bobContext);
      const cookies = await signIn(bobPage, app.url, 'bob.test', t.password);
      await bobPage.goto(`${app.url}/alice.test/site`);
      assert.equal(await bobPage.getByRole('link', { name: 'Settings' }).count(), 0);
      const res = await bobPage.goto(settings());
      assert.equal(res?.status(), 403);
      assert.match(await bobPage.content(), /Only alice\.test can manage the webhooks/);
      const [hook] = await app.index.webhooks.list(t.dids['alice.test']!, 'site');
      // A form of bob's own session (its CSRF token from a page of his), posted at alice's
      // webhook: refused, the webhook stays.
      const cookie = cookies.map((c) => `${c.name}=${c.value}`).join('; ');
      const own = await (await fetch(`${app.url}/bob.test`, { headers: { cookie } })).text();
      const csrf = /name="csrf" value="([^"]+)"/.exec(own)?.[1];
      assert.ok(csrf !== undefined, 'a page of bob carries his token');
      const { status } = await fetch(`${settings()}/${hook!.id}/remove`, {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf }).toString(),
        redirect: 'manual',
      });
      assert.equal(status, 403);
      assert.equal((await app.index.webhooks.list(t.dids['alice.test']!, 'site')).length, 1);
    } finally {
      await bobContext.close();
    }
  });

  it('alice removes the webhook: it is gone with its log, and the next push posts nothing', async () => {
    await page.goto(settings());
    await page.getByRole('button', { name: 'Remove' }).click();
    await page.getByText('Add a webhook').waitFor();
    assert.equal(await page.getByRole('heading', { name: rx.url }).count(), 0);
    assert.deepEqual(await app.index.webhooks.list(t.dids['alice.test']!, 'site'), []);
    await checkPage(page, cspErrors, 'webhook settings after removing');
    const before = rx.received.length;
    await commitFiles(alice, work, { 'a.txt': 'three\n' }, 'third');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const head = (await alice.ok(work, 'rev-parse', 'HEAD')).trim();
    // Once the push is indexed, its deliveries would have been queued in the same transaction.
    await waitFor('the push indexed', async () => {
      const [p] = await app.index.pushes({ did: t.dids['alice.test']!, repo: 'site', limit: 1 });
      return p?.new_target === head ? true : undefined;
    });
    await app.idle();
    assert.equal(rx.received.length, before);
  });
});
