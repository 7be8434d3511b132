// The compare page of a fork previews the pull request it opens, in Chromium on the dev network:
// the fork's main is behind the repository it was forked from, and the page, the pull request the
// page opens and the one `knotless pr create` opens all measure the branch against the upstream's
// main, the base a round is made on: the same commits and the same files.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { mainOf, signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let upstreamMain: string;
let feature: string;

/** The commits (full ids, newest first) and the changed files a compare or pull request page lists. */
async function shown(): Promise<{ commits: string[]; files: string[] }> {
  const commits = await page
    .locator('table.list:has(caption:text("Commits, newest first")) td:first-child a')
    .evaluateAll((as) => as.map((a) => a.getAttribute('title') ?? ''));
  const files = await page.locator('details.stat td:first-child a').allInnerTexts();
  return { commits, files };
}

describe("a fork's compare page and the pull request it opens", () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, work, { 'README.md': '# Site\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    // bob's fork is made now: its main stays at "start".
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    upstreamMain = await commitFiles(alice, work, { 'upstream.txt': 'later\n' }, 'upstream: a later commit');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    // bob builds on the upstream's main and pushes his branch to his fork, whose main is behind.
    const clone = bob.dir();
    await bob.ok(clone, 'clone', '-q', 'knotless://alice.test/site', '.');
    await bob.ok(clone, 'checkout', '-q', '-b', 'feature');
    feature = await commitFiles(bob, clone, { 'a.txt': 'a\n', 'b.txt': 'b\n' }, 'feature: a and b');
    await bob.ok(clone, 'push', '-q', 'knotless://bob.test/site', 'feature');
    assert.equal(await mainOf(alice, 'alice.test/site'), upstreamMain);
    await waitFor('both repositories mirrored', async () => {
      const [up, fork] = await Promise.all([
        fetch(`${app.url}/alice.test/site/commits/main`),
        fetch(`${app.url}/bob.test/site/compare/main...feature`),
      ]);
      return up.status === 200 &&
        (await up.text()).includes(upstreamMain.slice(0, 8)) &&
        fork.status === 200 &&
        (await fork.text()).includes('Open a pull request')
        ? true
        : undefined;
    });
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    await signIn(page, app.url, 'bob.test', t.password);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
  });

  it('the compare page, the pull request it opens and the CLI agree on its commits and files', async () => {
    await page.goto(`${app.url}/bob.test/site/compare/main...feature`);
    await checkPage(page, cspErrors, "a fork's compare page");
    const preview = await shown();
    assert.deepEqual(preview, { commits: [feature], files: ['a.txt', 'b.txt'] });

    await page.getByLabel('Title').fill('a and b');
    await page.getByRole('button', { name: 'Open pull request' }).click();
    await page.getByRole('heading', { name: 'a and b' }).waitFor();
    assert.deepEqual(await shown(), preview, 'the pull request holds what the compare page showed');
    // Its round, as the pull request page lists it: on the upstream's main.
    assert.equal(
      await page.locator('table.rounds td.mono').first().innerText(),
      `${upstreamMain.slice(0, 8)}..${feature.slice(0, 8)}`,
    );

    const cli = await bob.knotless(
      'pr',
      'create',
      'alice.test/site',
      '--head',
      'site:feature',
      '--base',
      'main',
      '--title',
      'a and b, from the CLI',
      '--json',
    );
    assert.equal(cli.code, 0, cli.stderr);
    const round = JSON.parse(cli.stdout) as { base: string; head: string };
    assert.deepEqual({ base: round.base, head: round.head }, { base: upstreamMain, head: feature });
  });
});
