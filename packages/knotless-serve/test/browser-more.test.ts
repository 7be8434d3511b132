// More pages in headless Chromium: file history, blame, grouped pushes, the Atom feed and
// OpenGraph tags, dark mode, phone width, pages following a push, and hostile names. Every visit
// checks the page's CSP and runs axe-core (browser-kit.ts). The repository is browser-site.ts's.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { commitFiles } from '../../knotless/test/helpers/git.ts';
import { checkPage } from './browser-kit.ts';
import { base, useSite } from './browser-site.ts';
import { appviewOn, waitFor } from './helpers.ts';

const site = useSite();

describe('more pages a reader expects, in Chromium', () => {
  before(site.setUp);
  after(site.tearDown);

  it('file history and blame', async () => {
    await site.visit(`${base}/history/main/docs/guide.md`, 'history');
    assert.equal(await site.page.locator('table.list tr').count(), 2);
    await site.visit(`${base}/blame/main/docs/guide.md`, 'blame');
    const rows = await site.page.locator('table.blame tr').allInnerTexts();
    assert.equal(rows.length, 7);
    assert.match(
      rows[0]!,
      new RegExp(`${site.c[0]!.slice(0, 8)}[\\s\\S]*add licence and docs[\\s\\S]*# Guide`),
    );
    assert.match(rows[3]!, new RegExp(`${site.c[1]!.slice(0, 8)}[\\s\\S]*guide: part two`));
  });

  it('home groups one push of several refs into one row; the Atom feed and OpenGraph tags', async () => {
    await site.visit('/', 'home');
    const rows = site.page.locator('table.list').first().locator('tr', { hasText: 'alice.test / site' });
    assert.equal(await rows.count(), 1);
    const pills = await rows.locator('.pill').allInnerTexts();
    assert.deepEqual(pills.sort(), ['main', 'topic', 'v1']);
    await site.visit(base, 'repository-og');
    assert.equal(
      await site.page.locator('meta[property="og:title"]').getAttribute('content'),
      'alice.test/site',
    );
    assert.equal(
      await site.page.locator('meta[property="og:description"]').getAttribute('content'),
      'a site',
    );
    const feedHref = await site.page.locator('link[type="application/atom+xml"]').getAttribute('href');
    const feed = await fetch(`${site.app.url}${feedHref ?? ''}`);
    assert.match(feed.headers.get('content-type') ?? '', /application\/atom\+xml/);
    const xml = await feed.text();
    assert.equal(xml.match(/<entry>/g)?.length, 3);
    assert.match(xml, /<title>many files<\/title>/);
  });

  it('dark mode by prefers-color-scheme, and phone width without sideways scrolling', async () => {
    await site.page.emulateMedia({ colorScheme: 'dark' });
    await site.visit(`${base}/commit/${site.c[1]!}`, 'commit-dark');
    assert.equal(
      await site.page.evaluate(() => getComputedStyle(document.body).backgroundColor),
      'rgb(13, 17, 23)',
    );
    await site.page.emulateMedia({ colorScheme: 'light' });
    await site.page.setViewportSize({ width: 390, height: 844 });
    for (const [url, shot] of [
      [base, 'phone-repository'],
      [`${base}/commit/${site.c[1]!}`, 'phone-commit'],
      [`${base}/branches`, 'phone-branches'],
      ['/', 'phone-home'],
      [`${base}/blob/main/COPYING`, 'phone-file'],
    ] as const) {
      await site.visit(url, shot);
      const width = await site.page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 390, `${url} is ${width} px wide at phone width`);
    }
    // A 1,536-character line scrolls inside its box rather than being cut off or widening the site.page.
    const box = site.page.locator('.box', { has: site.page.locator('table.code') });
    assert.ok(await box.evaluate((el) => el.scrollWidth > el.clientWidth + 1000));
    // (overflow hidden would clip it: a reader could not scroll there, though a script could.)
    assert.match(await box.evaluate((el) => getComputedStyle(el).overflowX), /^(auto|scroll)$/);
  });

  it('a new push shows on pages already read (refs, trees and logs are cached per commit)', async () => {
    await site.page.setViewportSize({ width: 1280, height: 800 });
    await site.visit(base, 'before-push');
    await site.alice.ok(site.work, 'checkout', '-q', 'main');
    const next = await commitFiles(site.alice, site.work, { COPYING: 'y'.repeat(2048) }, 'licence: longer');
    await site.alice.ok(site.work, 'push', '-q', 'origin', 'main');
    await waitFor('the push on the repository page', async () => {
      await site.page.goto(`${site.app.url}${base}`);
      return (await site.page.locator('.latest').innerText()).includes(next.slice(0, 8)) ? true : undefined;
    });
    assert.match(
      await site.page.locator('table.tree tr', { hasText: 'COPYING' }).innerText(),
      /licence: longer[\s\S]*2\.0 KiB/,
    );
    assert.match(await site.page.locator('.counts').innerText(), /4 commits/);
    await checkPage(site.page, site.cspErrors, 'after push');
  });

  it('hostile names and messages stay text on every new page', async () => {
    const branch = 'evil"<b>x';
    const file = '<img src=x onerror=alert(1)>.txt';
    await site.alice.ok(site.work, 'checkout', '-q', '-b', branch, 'main');
    const evil = await commitFiles(
      site.alice,
      site.work,
      { [file]: '<script>window.pwned = 1</script>\n' },
      '<script>window.pwned = 2</script>\x01',
    );
    await site.alice.ok(site.work, 'push', '-q', 'origin', branch);
    await waitFor('the hostile branch', async () => {
      const r = await fetch(`${site.app.url}${base}/branches`);
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
      await site.visit(url, shot);
      assert.equal(await site.page.locator('main b, main img[src="x"]').count(), 0, url);
      assert.equal(
        await site.page.evaluate(() => (window as unknown as { pwned?: number }).pwned),
        undefined,
        url,
      );
    }
    await site.visit(`${base}/tree/${enc(branch)}`, 'hostile-tree');
    assert.equal(await site.page.locator('table.tree a', { hasText: file }).count(), 1);
    const feed = await (await fetch(`${site.app.url}${base}/atom/${enc(branch)}`)).text();
    // Escaped, and the control character (no XML 1.0 document may hold it) replaced.
    assert.match(feed, /<title>&lt;script&gt;window\.pwned = 2&lt;\/script&gt;\ufffd<\/title>/);
    assert.ok(!feed.includes('\x01'), 'no control character in the feed');
  });

  it('the clone box says HTTPS only when the public URL is https', async () => {
    const other = await appviewOn(site.net, ':memory:', undefined, {
      publicUrl: 'https://code.example',
      backfillDids: [site.net.dids['alice.test']!],
    });
    try {
      const text = await waitFor('the backfilled repository page', async () => {
        const r = await fetch(`${other.url}${base}`);
        return r.status === 200 ? r.text() : undefined;
      });
      assert.match(text, /plain git over HTTPS, read-only/);
      assert.match(text, /value="git clone https:\/\/code\.example\/alice\.test\/site"/);
      assert.doesNotMatch(text, /unencrypted/);
    } finally {
      await other.close();
    }
  });
});
