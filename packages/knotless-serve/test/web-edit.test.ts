// Editing a file in the browser, at its edges, in Chromium on the dev network: a path git will not
// check out is refused with the reader's text kept on the page and nothing written; every file the
// editor opens can be saved, however its text grows when the form encodes it, and keeps its line
// ends; a file the page cannot carry byte for byte, or at a path that could not be saved, is not
// opened.
import assert from 'node:assert/strict';
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

/** 510 KiB of short lines with an accent: each of its bytes takes 4 in the posted form. */
const BIG = 'é\n'.repeat(174_000);
/**
 * The worst a form can grow: empty lines, each byte 6 in the form (`%0D%0A`), and 2 bytes short
 * of 512 KiB, the editor's limit, so that the line the test adds fills it exactly. It also starts
 * with a line break, which HTML drops right after <textarea> unless the page puts one first.
 */
const BLANK = '\n'.repeat(512 * 1024 - 2);

let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];

async function cloned(): Promise<string> {
  const dir = alice.dir();
  await alice.ok(dir, 'clone', '-q', 'knotless://alice.test/site', '.');
  return dir;
}

/** Opens the editor on `file` once the appview's copy has main's tip (an edit of a tip behind is a 409). */
async function openEditor(file: string): Promise<void> {
  const tip = await mainOf(alice, 'alice.test/site');
  await waitFor("the appview at main's tip", async () => {
    await page.goto(`${app.url}/alice.test/site/edit/main/${file}`);
    return (await page.locator('input[name="base"]').inputValue()) === tip ? true : undefined;
  });
}

describe('editing a file in the browser, at its edges', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    const files = {
      'README.md': '# Site\n',
      'big.txt': BIG,
      'blank.txt': BLANK,
      'dos.txt': 'one\r\ntwo\r\n',
      'mixed.txt': 'one\r\ntwo\n',
      'tab\tname.txt': 'x\n',
    };
    await commitFiles(alice, work, files, 'start');
    fs.writeFileSync(path.join(work, 'latin1.txt'), Buffer.from('caf\xe9\n', 'latin1'));
    await alice.ok(work, 'add', 'latin1.txt');
    await alice.ok(work, 'commit', '-q', '-m', 'a Latin-1 file');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const tip = await mainOf(alice, 'alice.test/site');
    await waitFor('the push mirrored', async () => {
      const res = await fetch(`${app.url}/alice.test/site/commits/main`);
      return res.status === 200 && (await res.text()).includes(tip.slice(0, 7)) ? true : undefined;
    });
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    await signIn(page, app.url, 'alice.test', t.password);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
  });

  it('a path git will not check out: 400, one sentence, the text and message kept, nothing written', async () => {
    const before = await mainOf(alice, 'alice.test/site');
    await page.goto(`${app.url}/alice.test/site/edit/main/README.md`);
    await page.getByLabel('README.md').fill('# Site\n\nA careful edit.\n');
    await page.getByLabel('Commit message').fill('Keep what I typed');
    // A form whose path was changed on its way (the page itself only posts the file it opened).
    await page.locator('input[name="path"]').evaluate((el) => ((el as HTMLInputElement).value = 'git~1/x'));
    // Three MiB of form and a commit of half a MiB: on a loaded machine longer than Playwright's
    // default 30 s, so these wait for the answer itself, bounded by the test runner's limit.
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST', { timeout: 0 }),
      page.getByRole('button', { name: 'Commit to main' }).click({ timeout: 0 }),
    ]);
    assert.equal(answer.status(), 400);
    assert.equal(
      await page.getByRole('alert').innerText(),
      '"git~1/x" is not a path git will check out: its part "git~1" is the .git folder on Windows (NTFS); choose another.',
    );
    assert.equal(await page.locator('textarea[name="content"]').inputValue(), '# Site\n\nA careful edit.\n');
    assert.equal(await page.getByLabel('Commit message').inputValue(), 'Keep what I typed');
    await checkPage(page, cspErrors, 'the refused edit, shown again');
    assert.equal(await mainOf(alice, 'alice.test/site'), before, 'nothing written');
  });

  it('a file of 510 KiB the editor opens is saved, though its form is four times that', async () => {
    const opened = await page.goto(`${app.url}/alice.test/site/edit/main/big.txt`);
    assert.equal(opened?.status(), 200);
    await page.getByLabel('big.txt').evaluate((el) => ((el as HTMLTextAreaElement).value += 'one more\n'));
    await page.getByLabel('Commit message').fill('One more line');
    // Megabytes of form: as above, waited for without Playwright's 30 s default.
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST', { timeout: 0 }),
      page.getByRole('button', { name: 'Commit to main' }).click({ timeout: 0 }),
    ]);
    assert.equal(answer.status(), 303, await answer.text().catch(() => ''));
    const dir = await cloned();
    assert.ok(fs.readFileSync(path.join(dir, 'big.txt')).equals(Buffer.from(`${BIG}one more\n`)));
  });

  it('512 KiB of empty lines, the worst a form grows (six times), is saved byte for byte', async () => {
    await openEditor('blank.txt');
    await page.getByLabel('blank.txt').evaluate((el) => ((el as HTMLTextAreaElement).value += 'x\n'));
    // Megabytes of form: as above, waited for without Playwright's 30 s default.
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST', { timeout: 0 }),
      page.getByRole('button', { name: 'Commit to main' }).click({ timeout: 0 }),
    ]);
    assert.equal(answer.status(), 303, await answer.text().catch(() => ''));
    assert.ok(
      answer.request().postDataBuffer()!.length > 6 * 512 * 1024 - 100,
      'the form was the worst case',
    );
    const saved = fs.readFileSync(path.join(await cloned(), 'blank.txt'));
    assert.equal(saved.length, 512 * 1024);
    assert.ok(saved.equals(Buffer.from(`${BLANK}x\n`)));
  });

  it('a file with CRLF line ends keeps them when saved from the text area', async () => {
    await openEditor('dos.txt');
    await page.getByLabel('dos.txt').fill('one\ntwo\nthree\n');
    await page.getByRole('button', { name: 'Commit to main' }).click();
    await page.waitForURL(/\/commits\/main$/);
    const dir = await cloned();
    assert.equal(fs.readFileSync(path.join(dir, 'dos.txt'), 'latin1'), 'one\r\ntwo\r\nthree\r\n');
  });

  it('a file the page cannot carry byte for byte, or whose path could not be saved, is not opened', async () => {
    const cases: [string, RegExp][] = [
      [
        'latin1.txt',
        /latin1\.txt cannot be edited here: it is not UTF-8 text; change it with git and push\./,
      ],
      ['mixed.txt', /mixed\.txt cannot be edited here: its lines end in a mix of LF, CRLF and CR/],
      ['tab%09name.txt', /tab\\tname\.txt cannot be edited here: it holds a control/],
    ];
    for (const [file, says] of cases) {
      const res = await page.goto(`${app.url}/alice.test/site/edit/main/${file}`);
      assert.equal(res?.status(), 400, file);
      assert.match(await page.locator('main').innerText(), says);
    }
  });

  // Last: it ends alice's sign-in.
  it('an edit whose sign-in no longer holds: 401, one sentence, a sign-in link, the text and message kept', async () => {
    const before = await mainOf(alice, 'alice.test/site');
    await openEditor('README.md');
    await page.getByLabel('README.md').fill('# Site\n\nWritten as the sign-in lapsed.\n');
    await page.getByLabel('Commit message').fill('Do not lose this');
    // The appview's stored grant for alice is gone (as when her PDS refused its refresh).
    await app.index.db.deleteFrom('oauth_sessions').where('did', '=', t.dids['alice.test']!).execute();
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST'),
      page.getByRole('button', { name: 'Commit to main' }).click(),
    ]);
    assert.equal(answer.status(), 401);
    assert.equal(
      await page.getByRole('alert').innerText(),
      'Your sign-in has expired or was revoked; sign in again.',
    );
    await page.getByRole('link', { name: 'Sign in again' }).waitFor();
    assert.equal(
      await page.getByLabel('README.md').inputValue(),
      '# Site\n\nWritten as the sign-in lapsed.\n',
    );
    assert.equal(await page.getByLabel('Commit message').inputValue(), 'Do not lose this');
    assert.equal(await page.getByText('Signed in as').count(), 0);
    await checkPage(page, cspErrors, 'the lapsed sign-in, with the edit kept');
    assert.equal(await mainOf(alice, 'alice.test/site'), before, 'nothing written');
  });
});
