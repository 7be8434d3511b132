// The pages a reader coming from other forges expects, in headless Chromium: clone box first with
// a copy button, README links to the repository's files, last commit per entry, counts, the ref
// switcher, commit pages with diffstat and line numbers, paged diffs, branches and tags pages and
// archives. Every visit checks the page's CSP and runs axe-core (browser-kit.ts); screenshots go
// to a printed directory. The repository is browser-site.ts's.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkPage, watchedPage } from './browser-kit.ts';
import { base, useSite } from './browser-site.ts';
import { launchChromium, profileOf } from './chromium.ts';
import { runProcess } from '../../knotless/test/helpers/cli.ts';
import { waitFor, xrpc } from './helpers.ts';

const site = useSite();

describe('the pages a reader expects, in Chromium', () => {
  before(site.setUp);
  after(site.tearDown);

  it('the site.page checks fail on an inline style, an inline script and an unlabelled field', async () => {
    const { page: probe, cspErrors: errors } = await watchedPage(site.browser);
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

  it('leaves no browser profile behind once the browser closes', async () => {
    const browser = await launchChromium();
    const profile = profileOf(browser)!;
    assert.ok(fs.existsSync(profile), profile);
    await browser.close();
    assert.equal(fs.existsSync(profile), false, `${profile} was left behind`);
  });

  it('repository page: clone box first with copy buttons, counts, sizes, last commits, README links', async () => {
    await site.visit(base, 'repository');
    const clone = await site.page.locator('details.clone').boundingBox();
    const tree = await site.page.locator('table.tree').boundingBox();
    assert.ok(clone !== null && tree !== null && clone.y < tree.y, 'the clone box is above the tree');
    const main = await site.page.locator('main').innerText();
    assert.match(main, /plain git over HTTP \(unencrypted\), read-only/, 'the scheme the URL really has');
    assert.doesNotMatch(main, /HTTPS/);
    await site.page.locator('details.clone button').first().click();
    assert.equal(
      await site.page.evaluate(() => navigator.clipboard.readText()),
      'git clone knotless://alice.test/site',
    );
    await site.page.locator('details.clone button').nth(1).click();
    assert.equal(
      await site.page.evaluate(() => navigator.clipboard.readText()),
      `git clone ${site.app.url}/alice.test/site`,
    );
    assert.match(main, /3 commits/);
    assert.match(main, /2 branches/);
    assert.match(main, /1 tag\b/);
    const row = (name: string) => site.page.locator('table.tree tr', { hasText: name }).innerText();
    assert.match(await row('COPYING'), /add licence and docs[\s\S]*1\.5 KiB/);
    assert.match(await row('docs/'), /guide: part two/);
    assert.match(await row('gen/'), /many files/);
    const hrefs = await site.page
      .locator('.readme a')
      .evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    assert.deepEqual(hrefs, [
      `${base}/blob/main/COPYING`,
      `${base}/blob/main/docs`,
      `${base}/blob/main/docs/guide.md#part-2`,
      `${base}/blob/main`,
      '#site',
    ]);
    assert.ok(
      await site.page.locator('.readme img').evaluate((img) => (img as HTMLImageElement).naturalWidth === 1),
    );
    await site.page.locator('.readme a', { hasText: 'the licence' }).click();
    await site.page.waitForURL(`${site.app.url}${base}/blob/main/COPYING`);
    assert.match(await site.page.locator('table.code').innerText(), /^1\s+x{100}/);
    await site.page.goBack();
    await site.page.locator('.readme a', { hasText: 'the docs' }).click();
    await site.page.waitForURL(`${site.app.url}${base}/tree/main/docs`);
    assert.match(await site.page.locator('table.tree').innerText(), /guide\.md/);
  });

  it('the switcher moves to another branch; tags sort by date', async () => {
    // Two more tags, annotated, dated on either side of v1 (made now): by date the list reads
    // m-new, v1, a-old, which is neither the names' order nor its reverse.
    const { alice, work, c } = site;
    for (const [name, date, commit] of [
      ['m-new', '2030-01-01T00:00:00Z', c[0]!],
      ['a-old', '2001-01-01T00:00:00Z', c[2]!],
    ] as const) {
      const made = await runProcess('git', ['tag', '-a', name, '-m', `tag ${name}`, commit], {
        env: { ...alice.env, GIT_COMMITTER_DATE: date },
        cwd: work,
      });
      assert.equal(made.code, 0, made.stderr);
    }
    await alice.ok(work, 'push', '-q', 'origin', 'm-new', 'a-old');
    await waitFor('five refs mirrored', async () => {
      const r = await xrpc<{ refs: unknown[] }>(site.app, 'dev.knotless.getRepo', {
        actor: 'alice.test',
        repo: 'site',
      });
      return r.refs.length === 5 ? true : undefined;
    });
    await site.app.idle();
    const byDate = ['m-new', 'v1', 'a-old'];
    await site.visit(`${base}/tags`, 'tags-by-date');
    const rows = await site.page.locator('table.list tr td:first-child').allInnerTexts();
    assert.deepEqual(
      rows.map((r) => r.trim()),
      byDate,
    );
    await site.visit(base, 'repository-again');
    const switcherTags = await site.page
      .locator('details.switch .menu ul')
      .nth(1)
      .locator('a')
      .allTextContents();
    assert.deepEqual(
      switcherTags.map((t) => t.trim()),
      byDate,
    );
    await site.page.locator('details.switch summary').click();
    await site.visit(`${base}/tree/main/docs`, 'tree');
    // A README in a directory: its relative links start from that directory.
    assert.deepEqual(
      await site.page.locator('.readme a').evaluateAll((as) => as.map((a) => a.getAttribute('href'))),
      [`${base}/blob/main/COPYING`, `${base}/blob/main/docs/guide.md`],
    );
    await site.page.locator('details.switch summary').click();
    await site.page.screenshot({ path: path.join(site.shots, 'switcher.png') });
    await site.page.locator('details.switch a', { hasText: 'topic' }).click();
    await site.page.waitForURL(`${site.app.url}${base}/tree/topic/docs`);
  });

  it('commit page: diffstat, line numbers, short id with the full one to copy, browse files, paging', async () => {
    await site.visit(`${base}/commit/${site.c[1]!}`, 'commit');
    const head = await site.page.locator('main .box').first().innerText();
    assert.match(head, new RegExp(`commit ${site.c[1]!.slice(0, 8)}\\b`));
    assert.doesNotMatch(head, new RegExp(site.c[1]!), 'the full id is not printed');
    await site.page.getByRole('button', { name: 'Copy full id' }).click();
    assert.equal(await site.page.evaluate(() => navigator.clipboard.readText()), site.c[1]);
    assert.match(await site.page.locator('details.stat summary').innerText(), /1 file changed, \+4 −0/);
    const added = await site.page
      .locator('table.code tr', { hasText: '+## Part 2' })
      .locator('td')
      .allInnerTexts();
    assert.deepEqual(added.slice(0, 2), ['', '5'], 'new line number 5, no old one');
    await site.page.getByRole('link', { name: 'Browse files' }).click();
    await site.page.waitForURL(`${site.app.url}${base}/tree/${site.c[1]!}`);
    assert.equal(
      await site.page.locator('table.tree a', { hasText: 'gen/' }).count(),
      0,
      'the tree at that commit',
    );
    await site.visit(`${base}/commit/${site.c[2]!}`, 'commit-paged');
    assert.match(await site.page.locator('details.stat summary').innerText(), /46 files changed/);
    assert.match(await site.page.locator('.pager').first().innerText(), /page 1 of 2/);
    assert.equal(await site.page.locator('[id^=f]').count(), 40);
    // The 500-line file is collapsed: its summary shows, its lines do not until opened.
    const big = site.page.locator('details#f0');
    assert.equal(await big.getAttribute('open'), null);
    assert.match(await big.locator('summary').innerText(), /gen\/big\.txt \+500 −0 \(large: 501 lines/);
    assert.equal(await big.locator('td', { hasText: 'line 499' }).isVisible(), false);
    await big.locator('summary').click();
    assert.equal(await big.locator('td', { hasText: 'line 499' }).isVisible(), true);
    assert.equal(
      await site.page.locator('details.stat a', { hasText: 'gen/f44.txt' }).getAttribute('href'),
      `${base}/commit/${site.c[2]!}?page=2#f45`,
    );
    await site.page.getByRole('link', { name: 'Next →' }).first().click();
    await site.page.waitForURL(/\?page=2/);
    assert.equal(await site.page.locator('[id^=f]').count(), 6);
    assert.match(await site.page.locator('#f45').innerText(), /\+file 44/);
  });

  it('compare is paged by file', async () => {
    await site.visit(`${base}/compare/${site.c[0]!}...topic`, 'compare');
    assert.match(await site.page.locator('main').innerText(), /3 commits on topic/);
    assert.match(await site.page.locator('.pager').first().innerText(), /page 1 of 2/);
  });

  it('branches and tags pages, archives', async () => {
    await site.visit(`${base}/branches`, 'branches');
    // A figure not ready within the page's budget shows as "counting…" and is there on a later view.
    await waitFor('the ahead/behind figure', async () => {
      const row = await site.page.locator('tr', { hasText: 'topic' }).innerText();
      if (/1 ahead, 0 behind/.test(row)) return true;
      assert.match(row, /counting…/);
      await site.page.reload();
      return undefined;
    });
    assert.match(await site.page.locator('tr', { hasText: 'main' }).first().innerText(), /default/);
    await site.visit(`${base}/tags`, 'tags');
    assert.match(await site.page.locator('table.list').innerText(), /v1[\s\S]*guide: part two/);
    const tgz = await fetch(`${site.app.url}${base}/archive/v1.tar.gz`);
    assert.equal(tgz.status, 200);
    assert.match(tgz.headers.get('content-disposition') ?? '', /filename="site-v1\.tar\.gz"/);
    const file = path.join(site.shots, 'v1.tar.gz');
    fs.writeFileSync(file, Buffer.from(await tgz.arrayBuffer()));
    const listing = execFileSync('tar', ['-tzf', file], { encoding: 'utf8' }).split('\n');
    assert.ok(listing.includes('site-v1/docs/guide.md') && !listing.some((l) => l.includes('gen/')));
    const zip = Buffer.from(await (await fetch(`${site.app.url}${base}/archive/main.zip`)).arrayBuffer());
    assert.equal(zip.subarray(0, 2).toString('latin1'), 'PK');
    assert.equal((await fetch(`${site.app.url}${base}/archive/nope.zip`)).status, 404);
  });
});
