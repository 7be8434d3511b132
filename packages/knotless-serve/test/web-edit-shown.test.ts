// The page after Commit to main, in Chromium on the dev network: the appview made the commit, so
// its index and mirror take it at once, as from the commit's event, and the commits page it leads
// to lists it, also on an appview that follows no event stream; when its mirror's sync fails, the
// page says the commit was made and that this appview's copy does not have it yet; when the
// repository is past the mirror's size limit, that it is in the owner's account and how to see it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { mainOf, signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');

let dir: string;
let app: Appview | undefined;
let browser: BrowserContext | undefined;
let page: Page;
let cspErrors: string[];

/**
 * An appview on the index and mirrors the tests share that follows no event stream: it learns of
 * a ref record only when it writes it itself. Signed in as alice in a fresh browser.
 */
async function deafAppview(extra: Parameters<typeof appviewOn>[3] = {}): Promise<Appview> {
  await browser?.close();
  await app?.close();
  app = await appviewOn(t, path.join(dir, 'index.sqlite'), dir, { firehoses: [], ...extra });
  browser = await launchBrowser();
  ({ page, cspErrors } = await watchedPage(browser));
  await signIn(page, app.url, 'alice.test', t.password);
  return app;
}

/** Edits README.md on main in the browser and commits it; the answer to the post. */
async function commitReadme(on: Appview, text: string, message: string): Promise<{ status: number }> {
  await page.goto(`${on.url}/alice.test/notes/edit/main/README.md`);
  await page.getByLabel('README.md').fill(text);
  await page.getByLabel('Commit message').fill(message);
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST', { timeout: 0 }),
    page.getByRole('button', { name: 'Commit to main' }).click(),
  ]);
  await page.waitForLoadState();
  return { status: answer.status() };
}

describe('the page after Commit to main', () => {
  before(async () => {
    await t.ready;
    dir = t.tmpdir();
    // Learned once from the stream; the appviews below follow none.
    const following = await appviewOn(t, path.join(dir, 'index.sqlite'), dir);
    try {
      assert.equal((await alice.knotless('repo', 'create', 'notes')).code, 0);
      const work = await newRepo(alice, 'knotless://alice.test/notes');
      await commitFiles(alice, work, { 'README.md': '# Notes\n' }, 'start');
      await alice.ok(work, 'push', '-q', 'origin', 'main');
      const tip = await mainOf(alice, 'alice.test/notes');
      await waitFor('the push mirrored', async () => {
        const res = await fetch(`${following.url}/alice.test/notes/commits/main`);
        return res.status === 200 && (await res.text()).includes(tip.slice(0, 7)) ? true : undefined;
      });
    } finally {
      await following.close();
    }
  });
  after(async () => {
    await browser?.close();
    await app?.close();
  });

  it('lists the commit just made, first, though no event told this appview of it', async () => {
    const on = await deafAppview();
    const { status } = await commitReadme(on, '# Notes\n\nShown at once.\n', 'Shown at once');
    assert.equal(status, 303);
    assert.match(page.url(), /\/alice\.test\/notes\/commits\/main$/);
    const tip = await mainOf(alice, 'alice.test/notes');
    const first = await page.locator('main table.list tr').first().innerText();
    assert.match(first, new RegExp(`^${tip.slice(0, 8)}\\s+Shown at once\\s`));
    await checkPage(page, cspErrors, 'the commits page after a commit');
  });

  it('a mirror whose sync fails: the page says the commit was made and this copy does not have it yet', async () => {
    const on = await deafAppview();
    // A lock a crashed git left behind: the mirror's sync cannot move main, though nothing is too large.
    const lock = path.join(on.mirror.gitDir(t.dids['alice.test']!, 'notes'), 'refs', 'heads', 'main.lock');
    fs.writeFileSync(lock, '');
    try {
      const before = await mainOf(alice, 'alice.test/notes');
      const { status } = await commitReadme(on, '# Notes\n\nNot yet mirrored.\n', 'Not yet mirrored');
      const tip = await mainOf(alice, 'alice.test/notes');
      assert.notEqual(tip, before, 'the commit was made');
      assert.equal(status, 200);
      assert.equal(
        await page.getByRole('status').innerText(),
        `Committed ${tip.slice(0, 8)} to main. This appview's copy does not have it yet; its commits show it once it does.`,
      );
      await page.getByRole('link', { name: 'its commits' }).click();
      assert.match(page.url(), /\/alice\.test\/notes\/commits\/main$/);
      assert.equal(
        await page
          .locator('main table.list')
          .innerText()
          .then((s) => s.includes(tip.slice(0, 8))),
        false,
      );
      await checkPage(page, cspErrors, 'the page after a commit this copy does not have yet');
    } finally {
      fs.rmSync(lock, { force: true });
    }
  });

  it("a repository over the mirror's size limit: the page says the commit is in the account and how to see it", async () => {
    // Over this appview's size limit once the commit's pack is added: its mirror refuses to sync,
    // now and on every later event, so no page of this appview will show the commit.
    const on = await deafAppview({ maxRepoBytes: 1 });
    const before = await mainOf(alice, 'alice.test/notes');
    const text = `# Notes\n\n${crypto.randomBytes(2048).toString('hex')}\n`;
    const { status } = await commitReadme(on, text, 'Too large to mirror');
    const tip = await mainOf(alice, 'alice.test/notes');
    assert.notEqual(tip, before, 'the commit was made');
    assert.equal(status, 200);
    assert.equal(
      await page.getByRole('status').innerText(),
      `Committed ${tip.slice(0, 8)} to main in alice.test's account. This appview does not mirror repositories ` +
        `this large, so its pages will not show it; clone it to see it: git clone knotless://alice.test/notes`,
    );
    // No promise of a page that will never list it.
    assert.equal(await page.getByRole('link', { name: 'its commits' }).count(), 0);
    await checkPage(page, cspErrors, 'the page after a commit this appview does not mirror');
  });
});
