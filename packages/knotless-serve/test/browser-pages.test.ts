// The pages a reader coming from other forges expects, in headless Chromium: clone box first with
// a copy button, README links to the repository's files, last commit per entry, counts, the ref
// switcher, commit pages with diffstat and line numbers, paged diffs, branches and tags pages,
// history, blame, archives, grouped pushes, the Atom feed, dark mode and phone width. Every visit
// checks the page's CSP and runs axe-core (browser-kit.ts); screenshots go to a printed directory.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
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
const shots = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-pages-'));
let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
const c: string[] = [];
let work: string;

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const README = `# Site

See [the licence](COPYING), [the docs](docs/), [part two](./docs/guide.md#part-2),
[the root](/) and [the top](#site).

![logo](docs/logo.png)
`;

async function setUp(): Promise<void> {
  app = await appviewOn(t, ':memory:');
  const created = await alice.knotless('repo', 'create', 'site', '--description', 'a site');
  assert.equal(created.code, 0, created.stderr);
  work = await newRepo(alice, 'knotless://alice.test/site');
  c.push(
    await commitFiles(
      alice,
      work,
      {
        'README.md': README,
        COPYING: 'x'.repeat(1536),
        'docs/guide.md': '# Guide\n\none\n',
        'docs/logo.png': PNG,
      },
      'add licence and docs',
    ),
  );
  c.push(
    await commitFiles(
      alice,
      work,
      { 'docs/guide.md': '# Guide\n\none\n\n## Part 2\n\ntwo\n' },
      'guide: part two',
    ),
  );
  await alice.ok(work, 'tag', 'v1');
  const many: Record<string, string> = {};
  for (let i = 0; i < 45; i++) many[`gen/f${String(i).padStart(2, '0')}.txt`] = `file ${i}\n`;
  // Sorted first in the diff, and over the 400 lines past which a file's diff is collapsed.
  many['gen/big.txt'] = Array.from({ length: 500 }, (_, i) => `line ${i}\n`).join('');
  c.push(await commitFiles(alice, work, many, 'many files'));
  await alice.ok(work, 'checkout', '-q', '-b', 'topic');
  c.push(await commitFiles(alice, work, { 'topic.txt': 'on topic\n' }, 'topic: one more'));
  await alice.ok(work, 'checkout', '-q', 'main');
  // One push of two branches and a tag: the home page shows it as one push.
  await alice.ok(work, 'push', '-q', 'origin', 'main', 'topic', 'v1');
  await waitFor('three refs mirrored', async () => {
    const r = await xrpc<{ refs: unknown[] }>(app, 'dev.knotless.getRepo', {
      actor: 'alice.test',
      repo: 'site',
    });
    return r.refs.length === 3 ? true : undefined;
  });
  await app.idle();
  browser = await launchBrowser();
  await browser.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
  ({ page, cspErrors } = await watchedPage(browser));
}

async function tearDown(): Promise<void> {
  await browser?.close();
  await app?.close();
  console.log(`# screenshots in ${shots}`);
}

async function visit(url: string, shot: string): Promise<void> {
  const res = await page.goto(`${app.url}${url}`);
  assert.equal(res?.status(), 200, url);
  await checkPage(page, cspErrors, url);
  await page.screenshot({ path: path.join(shots, `${shot}.png`), fullPage: true });
}

const base = '/alice.test/site';

describe('the pages a reader expects, in Chromium', () => {
  before(setUp);
  after(tearDown);

  it('the page checks fail on an inline style, an inline script and an unlabelled field', async () => {
    const { page: probe, cspErrors: errors } = await watchedPage(browser);
    // Served from a made-up origin without a CSP, so the page's own checks must catch each fault.
    const serve = async (body: string): Promise<void> => {
      await probe.route('http://probe.invalid/', (r) => r.fulfill({ body, contentType: 'text/html' }));
      await probe.goto('http://probe.invalid/');
      await probe.unroute('http://probe.invalid/');
    };
    const doc = (main: string) =>
      `<!doctype html><html lang="en"><title>t</title><main><h1>t</h1>${main}</main></html>`;
    await serve(doc('<p style="color:red">x</p>'));
    await assert.rejects(checkPage(probe, errors, 'probe'), /style attribute/);
    await serve(doc('<script>1</script>'));
    await assert.rejects(checkPage(probe, errors, 'probe'), /inline scripts/);
    await serve(doc('<button onclick="1">b</button>'));
    await assert.rejects(checkPage(probe, errors, 'probe'), /inline event handlers/);
    await serve(doc('<input type="text">'));
    await assert.rejects(checkPage(probe, errors, 'probe'), /axe-core/);
    await serve(doc('<p>fine</p>'));
    await checkPage(probe, errors, 'probe');
    await probe.close();
  });

  it('repository page: clone box first with copy buttons, counts, sizes, last commits, README links', async () => {
    await visit(base, 'repository');
    const clone = await page.locator('details.clone').boundingBox();
    const tree = await page.locator('table.tree').boundingBox();
    assert.ok(clone !== null && tree !== null && clone.y < tree.y, 'the clone box is above the tree');
    const main = await page.locator('main').innerText();
    assert.match(main, /plain git over HTTP \(unencrypted\), read-only/, 'the scheme the URL really has');
    assert.doesNotMatch(main, /HTTPS/);
    await page.locator('details.clone button').first().click();
    assert.equal(
      await page.evaluate(() => navigator.clipboard.readText()),
      'git clone knotless://alice.test/site',
    );
    await page.locator('details.clone button').nth(1).click();
    assert.equal(
      await page.evaluate(() => navigator.clipboard.readText()),
      `git clone ${app.url}/alice.test/site`,
    );
    assert.match(main, /3 commits/);
    assert.match(main, /2 branches/);
    assert.match(main, /1 tag\b/);
    const row = (name: string) => page.locator('table.tree tr', { hasText: name }).innerText();
    assert.match(await row('COPYING'), /add licence and docs[\s\S]*1\.5 KiB/);
    assert.match(await row('docs/'), /guide: part two/);
    assert.match(await row('gen/'), /many files/);
    const hrefs = await page.locator('.readme a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    assert.deepEqual(hrefs, [
      `${base}/blob/main/COPYING`,
      `${base}/blob/main/docs`,
      `${base}/blob/main/docs/guide.md#part-2`,
      `${base}/blob/main`,
      '#site',
    ]);
    assert.ok(
      await page.locator('.readme img').evaluate((img) => (img as HTMLImageElement).naturalWidth === 1),
    );
    await page.locator('.readme a', { hasText: 'the licence' }).click();
    await page.waitForURL(`${app.url}${base}/blob/main/COPYING`);
    assert.match(await page.locator('table.code').innerText(), /^1\s+x{100}/);
    await page.goBack();
    await page.locator('.readme a', { hasText: 'the docs' }).click();
    await page.waitForURL(`${app.url}${base}/tree/main/docs`);
    assert.match(await page.locator('table.tree').innerText(), /guide\.md/);
  });

  it('the switcher moves to another branch; tags sort by date', async () => {
    await visit(base, 'repository-again');
    await page.locator('details.switch summary').click();
    await visit(`${base}/tree/main/docs`, 'tree');
    await page.locator('details.switch summary').click();
    await page.screenshot({ path: path.join(shots, 'switcher.png') });
    await page.locator('details.switch a', { hasText: 'topic' }).click();
    await page.waitForURL(`${app.url}${base}/tree/topic/docs`);
  });

  it('commit page: diffstat, line numbers, short id with the full one to copy, browse files, paging', async () => {
    await visit(`${base}/commit/${c[1]!}`, 'commit');
    const head = await page.locator('main .box').first().innerText();
    assert.match(head, new RegExp(`commit ${c[1]!.slice(0, 8)}\\b`));
    assert.doesNotMatch(head, new RegExp(c[1]!), 'the full id is not printed');
    await page.getByRole('button', { name: 'Copy full id' }).click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), c[1]);
    assert.match(await page.locator('details.stat summary').innerText(), /1 file changed, \+4 −0/);
    const added = await page
      .locator('table.code tr', { hasText: '+## Part 2' })
      .locator('td')
      .allInnerTexts();
    assert.deepEqual(added.slice(0, 2), ['', '5'], 'new line number 5, no old one');
    await page.getByRole('link', { name: 'Browse files' }).click();
    await page.waitForURL(`${app.url}${base}/tree/${c[1]!}`);
    assert.equal(
      await page.locator('table.tree a', { hasText: 'gen/' }).count(),
      0,
      'the tree at that commit',
    );
    await visit(`${base}/commit/${c[2]!}`, 'commit-paged');
    assert.match(await page.locator('details.stat summary').innerText(), /46 files changed/);
    assert.match(await page.locator('.pager').first().innerText(), /page 1 of 2/);
    assert.equal(await page.locator('[id^=f]').count(), 40);
    // The 500-line file is collapsed: its summary shows, its lines do not until opened.
    const big = page.locator('details#f0');
    assert.equal(await big.getAttribute('open'), null);
    assert.match(await big.locator('summary').innerText(), /gen\/big\.txt \+500 −0 \(large: 501 lines/);
    assert.equal(await big.locator('td', { hasText: 'line 499' }).isVisible(), false);
    await big.locator('summary').click();
    assert.equal(await big.locator('td', { hasText: 'line 499' }).isVisible(), true);
    assert.equal(
      await page.locator('details.stat a', { hasText: 'gen/f44.txt' }).getAttribute('href'),
      `${base}/commit/${c[2]!}?page=2#f45`,
    );
    await page.getByRole('link', { name: 'Next →' }).first().click();
    await page.waitForURL(/\?page=2/);
    assert.equal(await page.locator('[id^=f]').count(), 6);
    assert.match(await page.locator('#f45').innerText(), /\+file 44/);
  });

  it('compare is paged by file', async () => {
    await visit(`${base}/compare/${c[0]!}...topic`, 'compare');
    assert.match(await page.locator('main').innerText(), /3 commits on topic/);
    assert.match(await page.locator('.pager').first().innerText(), /page 1 of 2/);
  });

  it('branches and tags pages, archives', async () => {
    await visit(`${base}/branches`, 'branches');
    // A figure not ready within the page's budget shows as "counting…" and is there on a later view.
    await waitFor('the ahead/behind figure', async () => {
      const row = await page.locator('tr', { hasText: 'topic' }).innerText();
      if (/1 ahead, 0 behind/.test(row)) return true;
      assert.match(row, /counting…/);
      await page.reload();
      return undefined;
    });
    assert.match(await page.locator('tr', { hasText: 'main' }).first().innerText(), /default/);
    await visit(`${base}/tags`, 'tags');
    assert.match(await page.locator('table.list').innerText(), /v1[\s\S]*guide: part two/);
    const tgz = await fetch(`${app.url}${base}/archive/v1.tar.gz`);
    assert.equal(tgz.status, 200);
    assert.match(tgz.headers.get('content-disposition') ?? '', /filename="site-v1\.tar\.gz"/);
    const file = path.join(shots, 'v1.tar.gz');
    fs.writeFileSync(file, Buffer.from(await tgz.arrayBuffer()));
    const listing = execFileSync('tar', ['-tzf', file], { encoding: 'utf8' }).split('\n');
    assert.ok(listing.includes('site-v1/docs/guide.md') && !listing.some((l) => l.includes('gen/')));
    const zip = Buffer.from(await (await fetch(`${app.url}${base}/archive/main.zip`)).arrayBuffer());
    assert.equal(zip.subarray(0, 2).toString('latin1'), 'PK');
    assert.equal((await fetch(`${app.url}${base}/archive/nope.zip`)).status, 404);
  });

  it('file history and blame', async () => {
    await visit(`${base}/history/main/docs/guide.md`, 'history');
    assert.equal(await page.locator('table.list tr').count(), 2);
    await visit(`${base}/blame/main/docs/guide.md`, 'blame');
    const rows = await page.locator('table.blame tr').allInnerTexts();
    assert.equal(rows.length, 7);
    assert.match(rows[0]!, new RegExp(`${c[0]!.slice(0, 8)}[\\s\\S]*add licence and docs[\\s\\S]*# Guide`));
    assert.match(rows[3]!, new RegExp(`${c[1]!.slice(0, 8)}[\\s\\S]*guide: part two`));
  });

  it('home groups one push of several refs into one row; the Atom feed and OpenGraph tags', async () => {
    await visit('/', 'home');
    const rows = page.locator('table.list').first().locator('tr', { hasText: 'alice.test / site' });
    assert.equal(await rows.count(), 1);
    const pills = await rows.locator('.pill').allInnerTexts();
    assert.deepEqual(pills.sort(), ['main', 'topic', 'v1']);
    await visit(base, 'repository-og');
    assert.equal(await page.locator('meta[property="og:title"]').getAttribute('content'), 'alice.test/site');
    assert.equal(await page.locator('meta[property="og:description"]').getAttribute('content'), 'a site');
    const feedHref = await page.locator('link[type="application/atom+xml"]').getAttribute('href');
    const feed = await fetch(`${app.url}${feedHref ?? ''}`);
    assert.match(feed.headers.get('content-type') ?? '', /application\/atom\+xml/);
    const xml = await feed.text();
    assert.equal(xml.match(/<entry>/g)?.length, 3);
    assert.match(xml, /<title>many files<\/title>/);
  });

  it('dark mode by prefers-color-scheme, and phone width without sideways scrolling', async () => {
    await page.emulateMedia({ colorScheme: 'dark' });
    await visit(`${base}/commit/${c[1]!}`, 'commit-dark');
    assert.equal(
      await page.evaluate(() => getComputedStyle(document.body).backgroundColor),
      'rgb(13, 17, 23)',
    );
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [url, shot] of [
      [base, 'phone-repository'],
      [`${base}/commit/${c[1]!}`, 'phone-commit'],
      [`${base}/branches`, 'phone-branches'],
      ['/', 'phone-home'],
      [`${base}/blob/main/COPYING`, 'phone-file'],
    ] as const) {
      await visit(url, shot);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `${url} is ${width} px wide at phone width`);
    }
    // A 1,536-character line scrolls inside its box rather than being cut off or widening the page.
    const box = page.locator('.box', { has: page.locator('table.code') });
    assert.ok(await box.evaluate((el) => el.scrollWidth > el.clientWidth + 1000));
    // (overflow hidden would clip it: a reader could not scroll there, though a script could.)
    assert.match(await box.evaluate((el) => getComputedStyle(el).overflowX), /^(auto|scroll)$/);
  });

  it('a new push shows on pages already read (refs, trees and logs are cached per commit)', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await visit(base, 'before-push');
    await alice.ok(work, 'checkout', '-q', 'main');
    const next = await commitFiles(alice, work, { COPYING: 'y'.repeat(2048) }, 'licence: longer');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await waitFor('the push on the repository page', async () => {
      await page.goto(`${app.url}${base}`);
      return (await page.locator('.latest').innerText()).includes(next.slice(0, 8)) ? true : undefined;
    });
    assert.match(
      await page.locator('table.tree tr', { hasText: 'COPYING' }).innerText(),
      /licence: longer[\s\S]*2\.0 KiB/,
    );
    assert.match(await page.locator('.counts').innerText(), /4 commits/);
    await checkPage(page, cspErrors, 'after push');
  });

  it('hostile names and messages stay text on every new page', async () => {
    const branch = 'evil"<b>x';
    const file = '<img src=x onerror=alert(1)>.txt';
    await alice.ok(work, 'checkout', '-q', '-b', branch, 'main');
    const evil = await commitFiles(
      alice,
      work,
      { [file]: '<script>window.pwned = 1</script>\n' },
      '<script>window.pwned = 2</script>',
    );
    await alice.ok(work, 'push', '-q', 'origin', branch);
    await waitFor('the hostile branch', async () => {
      const r = await fetch(`${app.url}${base}/branches`);
      return (await r.text()).includes('evil&quot;&lt;b&gt;x') ? true : undefined;
    });
    const enc = encodeURIComponent;
    for (const [url, shot] of [
      [`${base}/branches`, 'hostile-branches'],
      [`${base}/tree/${enc(branch)}`, 'hostile-tree'],
      [`${base}/commit/${evil}`, 'hostile-commit'],
      [`${base}/blame/${enc(branch)}/${enc(file)}`, 'hostile-blame'],
      [`${base}/history/${enc(branch)}/${enc(file)}`, 'hostile-history'],
      ['/', 'hostile-home'],
    ] as const) {
      await visit(url, shot);
      assert.equal(await page.locator('main b, main img[src="x"]').count(), 0, url);
      assert.equal(
        await page.evaluate(() => (window as unknown as { pwned?: number }).pwned),
        undefined,
        url,
      );
    }
    await visit(`${base}/tree/${enc(branch)}`, 'hostile-tree');
    assert.equal(await page.locator('table.tree a', { hasText: file }).count(), 1);
    const feed = await (await fetch(`${app.url}${base}/atom/${enc(branch)}`)).text();
    assert.match(feed, /<title>&lt;script&gt;window\.pwned = 2&lt;\/script&gt;<\/title>/);
  });
});
