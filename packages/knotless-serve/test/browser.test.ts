// The web UI in headless Chromium (the one @sparticuz/chromium ships, see chromium.ts, driven by
// playwright-core): home, repository, file, commit and compare pages, with screenshots and
// assertions on what they show; a README with <script> tags and javascript: links renders inert.
// Every visit also checks the page's CSP and runs axe-core (browser-kit.ts).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor, xrpc } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');
const shots = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-shots-'));
let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let first: string;
let topic: string;

const README = `# Demo <script>document.title = 'pwned'; window.pwned = 1;</script>

Hello from **markdown**. <img src="x" onerror="window.pwned = 2">

[a dangerous link](javascript:window.pwned=3) and [another](JAVASCRIPT:alert(1)) and
[data](data:text/html,<script>alert(1)</script>) and [a fine one](https://example.com/).
`;

// Inside the suite: root-level hooks run concurrently, and the user must be logged in first.
async function setUp(): Promise<void> {
  app = await appviewOn(t, ':memory:');
  const created = await alice.knotless('repo', 'create', 'demo', '--description', 'a demo <b>repo</b>');
  assert.equal(created.code, 0, created.stderr);
  const work = await newRepo(alice, 'knotless://alice.test/demo');
  first = await commitFiles(
    alice,
    work,
    {
      'README.md': README,
      'src/main.ts': 'export function greet(name: string): string {\n  return `hi ${name}`;\n}\n',
    },
    'first: README and greet',
  );
  await alice.ok(work, 'push', '-q', 'origin', 'main');
  await alice.ok(work, 'checkout', '-q', '-b', 'topic');
  topic = await commitFiles(alice, work, { 'src/main.ts': 'export const x = 42;\n' }, 'topic: replace greet');
  await alice.ok(work, 'push', '-q', 'origin', 'topic');
  await waitFor('both branches mirrored', async () => {
    const r = await xrpc<{ refs: unknown[] }>(app, 'dev.knotless.getRepo', {
      actor: 'alice.test',
      repo: 'demo',
    });
    return r.refs.length === 2 ? true : undefined;
  });
  await app.idle();
  browser = await launchBrowser();
  ({ page, cspErrors } = await watchedPage(browser));
  page.on('dialog', () => assert.fail('a script opened a dialog'));
}

async function tearDown(): Promise<void> {
  await browser?.close();
  await app?.close();
  console.log(`# screenshots in ${shots}`);
}

async function visit(url: string, shot: string): Promise<void> {
  const res = await page.goto(`${app.url}${url}`);
  assert.equal(res?.status(), 200, url);
  // Before the screenshot: taking one leaves empty style="" attributes on inputs (playwright hides carets).
  await checkPage(page, cspErrors, url);
  await page.screenshot({ path: path.join(shots, `${shot}.png`), fullPage: true });
}

describe('the web UI in Chromium', () => {
  before(setUp);
  after(tearDown);
  it('home lists the recent pushes and finds the repository by search', async () => {
    await visit('/', 'home');
    assert.match(await page.locator('main').innerText(), /alice\.test \/ demo/);
    assert.ok((await page.locator(`a[href="/alice.test/demo/commit/${topic}"]`).count()) > 0);
    await page.fill('input[name=q]', 'demo');
    await page.press('input[name=q]', 'Enter');
    await page.waitForURL(/\?q=demo/);
    assert.match(await page.locator('h1').innerText(), /matching “demo”/);
    assert.equal(await page.locator('main a[href="/alice.test/demo"]').count(), 1);
  });

  it('shows the repository: tree, README made inert, branches, clone commands', async () => {
    await visit('/alice.test/demo', 'repository');
    const main = await page.locator('main').innerText();
    assert.match(main, /a demo <b>repo<\/b>/, 'the description is escaped text');
    assert.match(main, /src\//);
    assert.equal(await page.locator(`input[value="git clone ${app.url}/alice.test/demo"]`).count(), 1);
    assert.equal(await page.locator('input[value^="git clone knotless://alice.test/demo"]').count(), 1);
    assert.equal(await page.locator('details.switch a', { hasText: 'topic' }).count(), 1);
    // The README: markdown rendered, every piece of HTML shown as text, no script run, no bad href.
    const readme = page.locator('.readme');
    assert.equal(await readme.locator('strong').innerText(), 'markdown');
    assert.match(await readme.innerText(), /<script>document\.title = 'pwned'/);
    assert.deepEqual(
      await page.locator('script').evaluateAll((ss) => ss.map((s) => s.getAttribute('src'))),
      ['/static/app.js'],
      'the only script is the copy button’s file',
    );
    assert.equal(await readme.locator('img').count(), 0);
    assert.equal(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned), undefined);
    assert.notEqual(await page.title(), 'pwned');
    const hrefs = await readme.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    assert.deepEqual(hrefs, ['https://example.com/']);
    for (const text of ['a dangerous link', 'another']) {
      const link = readme.getByText(text, { exact: false });
      assert.ok((await link.count()) >= 1);
    }
    await readme.getByText('a dangerous link', { exact: false }).first().click();
    assert.equal(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned), undefined);
  });

  it('shows a file highlighted, and its raw bytes', async () => {
    await visit('/alice.test/demo/blob/main/src/main.ts', 'file');
    assert.match(await page.locator('table.code').innerText(), /export function greet\(name: string\)/);
    assert.ok((await page.locator('table.code .hljs-keyword').count()) > 0, 'highlighted');
    await page.click('text=Raw');
    assert.match(await page.locator('body').innerText(), /^export function greet/);
  });

  it('shows a commit with its diff, and the log', async () => {
    await visit(`/alice.test/demo/commit/${topic}`, 'commit');
    assert.match(await page.locator('main').innerText(), /topic: replace greet/);
    assert.equal(await page.locator('.d-add', { hasText: '+export const x = 42;' }).count(), 1);
    assert.equal(await page.locator('.d-del', { hasText: '-export function greet' }).count(), 1);
    await visit('/alice.test/demo/commits/topic', 'log');
    const rows = await page.locator('table.list tr').allInnerTexts();
    assert.equal(rows.length, 2);
    assert.match(rows[1]!, new RegExp(first.slice(0, 8)));
  });

  it('compares two branches', async () => {
    await visit('/alice.test/demo/compare/main...topic', 'compare');
    const main = await page.locator('main').innerText();
    assert.match(main, /1 commit on topic since/);
    assert.match(main, /topic: replace greet/);
    assert.equal(await page.locator('.d-add', { hasText: '+export const x = 42;' }).count(), 1);
    assert.equal((await page.goto(`${app.url}/alice.test/demo/compare/main...nope`))?.status(), 404);
    for (const name of ['home', 'repository', 'file', 'commit', 'log', 'compare'])
      assert.ok(fs.statSync(path.join(shots, `${name}.png`)).size > 1000, name);
  });
});
