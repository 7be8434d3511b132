// The forge's pages in headless Chromium: the pull requests and issues of alice's repository as
// forge-site.ts wrote them (bob's pull request with two rounds, review comments, forged states,
// issues), each page checked against its CSP and by axe-core (browser-kit.ts); screenshots go to a
// printed directory.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runGit } from 'knotless-core';
import type { BrowserContext, Page } from 'playwright-core';
import { runProcess } from '../../knotless/test/helpers/cli.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { at, useForge } from './forge-site.ts';
import { waitFor, xrpc } from './helpers.ts';

const f = useForge();
const shots = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-forge-'));
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];

async function visit(url: string, shot: string): Promise<string> {
  const res = await page.goto(`${f.app.url}${url}`);
  assert.equal(res?.status(), 200, url);
  await checkPage(page, cspErrors, url);
  await page.screenshot({ path: path.join(shots, `${shot}.png`), fullPage: true });
  return page.locator('main').innerText();
}

const repo = '/alice.test/site';
const pullPath = () => `${repo}/pulls/${f.dids.bob}/${f.pull.rkey}`;

/** Whether alice's mirror holds an object. */
async function inAliceMirror(oid: string): Promise<boolean> {
  const out = await runGit(['cat-file', '-e', oid], {
    gitDir: f.app.mirror.gitDir(f.dids.alice, 'site'),
    okCodes: [1, 128],
  });
  return out.code === 0;
}

describe('pull request and issue pages, in Chromium', () => {
  before(async () => {
    await f.setUp();
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
  });
  after(async () => {
    await browser?.close();
    await f.app?.close();
    console.log(`# screenshots in ${shots}`);
  });

  it('repository page: open pull request and issue counts, and the tabs', async () => {
    const main = await visit(repo, 'repo');
    assert.match(main, /1 open pull request\b/);
    assert.match(main, /1 open issue\b/);
    assert.equal(
      await page.locator('nav.tabs a', { hasText: 'Pull requests' }).getAttribute('href'),
      `${repo}/pulls`,
    );
    assert.equal(
      await page.locator('nav.tabs a', { hasText: 'Issues' }).getAttribute('href'),
      `${repo}/issues`,
    );
  });

  it('the link a push of a new branch prints opens a prefilled new pull request on the fork', async () => {
    await runProcess('git', ['checkout', '-q', '-b', 'topic'], { env: f.bob.env, cwd: f.clone });
    const push = await runProcess('git', ['push', 'fork', 'topic'], {
      env: { ...f.bob.env, KNOTLESS_APPVIEW: f.app.url },
      cwd: f.clone,
    });
    assert.equal(push.code, 0, push.stderr);
    const link = /knotless:\s+(http:\/\/\S+\/compare\/\S+)/.exec(push.stderr)?.[1];
    assert.ok(link !== undefined, push.stderr);
    assert.equal(link, `${f.app.url}/bob.test/site/compare/main...topic`);
    await waitFor('topic mirrored', async () => {
      const r = await xrpc<{ refs: { ref: string }[] }>(f.app, 'dev.knotless.getRepo', {
        actor: 'bob.test',
        repo: 'site',
      });
      return r.refs.some((x) => x.ref === 'refs/heads/topic') ? true : undefined;
    });
    await f.app.idle();
    const main = await visit(link.slice(f.app.url.length), 'new-pull');
    assert.match(main, /forked from alice\.test\/site/);
    assert.match(main, /Open a pull request/);
    assert.equal(
      await page.locator('.newpull input').inputValue(),
      'knotless pr create alice.test/site --head bob.test/site:topic --base main --title topic',
    );
    await runProcess('git', ['checkout', '-q', 'feature'], { env: f.bob.env, cwd: f.clone });
  });

  it('pulls page: open by default, escaped title, ?state=closed empty, ?state=all', async () => {
    let main = await visit(`${repo}/pulls`, 'pulls');
    assert.match(main, /Shout <two> & add b/);
    assert.match(main, /bob\.test wants to merge feature into main/);
    assert.match(main, /2 rounds/);
    assert.match(main, /Open \(1\)/);
    assert.equal(await page.locator('main table.list a strong').count(), 1);
    main = await visit(`${repo}/pulls?state=closed`, 'pulls-closed');
    assert.match(main, /No closed pull requests/);
    main = await visit(`${repo}/pulls?state=all`, 'pulls-all');
    assert.match(main, /Shout <two> & add b/);
    assert.equal((await page.goto(`${f.app.url}${repo}/pulls?state=bogus`))?.status(), 404);
  });

  it("pull request page after bob deleted his branch: rounds, the last round's diff from its pack, comments", async () => {
    // The branch is gone from bob's fork, and alice's mirror never mirrors bob's fork: the round's
    // pack in bob's PDS is the only place his commits are. Alice's mirror took them from it as the
    // pull request's record came in (forge.test.ts), so the page need not wait for it.
    await runProcess('git', ['push', '-q', 'fork', ':feature'], { env: f.bob.env, cwd: f.clone });
    await waitFor('feature deleted from the fork', async () => {
      const r = await xrpc<{ refs: { ref: string }[] }>(f.app, 'dev.knotless.getRepo', {
        actor: 'bob.test',
        repo: 'site',
      });
      return r.refs.some((x) => x.ref === 'refs/heads/feature') ? undefined : true;
    });
    await f.app.idle();
    assert.equal(await inAliceMirror(f.heads[1]), true);
    const main = await visit(pullPath(), 'pull');
    assert.equal(await inAliceMirror(f.heads[1]), true);
    assert.match(main, /Shout <two> & add b/);
    assert.match(main, /Open/);
    assert.match(main, /bob\.test\/site:feature into main/);
    assert.equal(await page.locator('table.rounds tr').count(), 2);
    assert.match(main, /Round 1: changes/);
    const files = await page.locator('details.stat table a').allInnerTexts();
    assert.deepEqual(files, ['a.txt', 'b.txt', 'c.txt']);
    assert.match(
      main,
      /feature: shout two[\s\S]*feature: round two|feature: round two[\s\S]*feature: shout two/,
    );
    // Comments: escaped, with their rounds; the body's <script> and the comment's <img> are text.
    assert.equal(await page.locator('article.comment').count(), 2);
    assert.match(main, /Why is b\.txt needed\? <img src=x onerror=alert\(1\)>/);
    assert.equal(await page.locator('main img').count(), 0);
    assert.match(main, /<script>alert\(1\)<\/script>/);
    assert.equal(await page.locator('article.comment a.pill').first().innerText(), 'round 0');
  });

  it('round 0 and the interdiff between rounds 0 and 1', async () => {
    let main = await visit(`${pullPath()}?round=0`, 'pull-round0');
    assert.match(main, /Round 0: changes/);
    assert.deepEqual(await page.locator('details.stat table a').allInnerTexts(), ['a.txt', 'b.txt']);
    main = await visit(`${pullPath()}?round=1&interdiff=1`, 'pull-interdiff');
    assert.match(main, /Interdiff: round 0 → round 1/);
    assert.deepEqual(await page.locator('details.stat table a').allInnerTexts(), ['b.txt', 'c.txt']);
    assert.match(main, /\+see/);
    assert.doesNotMatch(main, /TWO/, 'a.txt did not change between the rounds');
    assert.equal((await page.goto(`${f.app.url}${pullPath()}?round=2`))?.status(), 404);
  });

  it("every row of the pull request's diff is one line tall, its line numbers beside its code", async () => {
    await visit(pullPath(), 'pull-diff-rows');
    // A hunk header row holds one line of text and no line number: the height of one line.
    const rows = await page
      .locator('table.code')
      .first()
      .evaluate((table) =>
        Array.from(table.querySelectorAll('tr:not(.notes)')).map((tr) => {
          const cells = Array.from(tr.querySelectorAll('td')).map((td) => td.getBoundingClientRect());
          const number = tr.querySelector('td.n2 a')?.getBoundingClientRect();
          const code = tr.querySelector('td:last-child');
          const text = document.createRange();
          text.selectNodeContents(code!);
          return {
            hunk: code!.classList.contains('d-hunk'),
            height: tr.getBoundingClientRect().height,
            numberTop: number?.top,
            codeTop: text.getClientRects()[0]?.top,
            cells: cells.length,
          };
        }),
      );
    const one = rows.find((r) => r.hunk)?.height;
    assert.ok(one !== undefined && one > 0, 'the diff has a hunk header');
    const linked = rows.filter((r) => r.numberTop !== undefined);
    assert.ok(linked.length >= 2, 'lines of the new side link to a comment on them');
    for (const [i, r] of rows.entries()) {
      assert.equal(r.cells, 3, `row ${i}: old number, new number, code`);
      assert.ok(r.height < one * 1.5, `row ${i} is ${r.height}px tall, one line is ${one}px`);
    }
    for (const [i, r] of linked.entries())
      assert.ok(
        Math.abs(r.numberTop! - r.codeTop!) < one / 2,
        `line ${i}: its number at ${r.numberTop}, its code at ${r.codeTop}`,
      );
  });

  it("the owner's merged status shows merged; the lists follow", async () => {
    await f.w.alice.create('dev.knotless.pull.status', {
      pull: f.pull.uri,
      status: 'merged',
      merged: f.heads[1],
      createdAt: at(60),
    });
    await waitFor('merged', async () => {
      const r = await xrpc<{ pull: { state: string } }>(f.app, 'dev.knotless.getPull', { uri: f.pull.uri });
      return r.pull.state === 'merged' ? true : undefined;
    });
    let main = await visit(pullPath(), 'pull-merged');
    assert.match(main, /Merged/);
    assert.match(main, /bob\.test's (\S+:)?feature was merged into main/);
    assert.doesNotMatch(main, /wants to merge/);
    assert.match(main, new RegExp(`merged as ${f.heads[1].slice(0, 8)}`));
    main = await visit(`${repo}/pulls`, 'pulls-after-merge');
    assert.match(main, /No open pull requests/);
    main = await visit(`${repo}/pulls?state=merged`, 'pulls-merged');
    assert.match(main, /Shout <two> & add b/);
    assert.match(main, /bob\.test's feature was merged into main/);
    assert.doesNotMatch(main, /wants to merge/);
    main = await visit(repo, 'repo-after-merge');
    assert.match(main, /0 open pull requests/);
  });

  it('issues page with the open/closed filter; an issue page with its comments', async () => {
    let main = await visit(`${repo}/issues`, 'issues');
    assert.match(main, /Docs typo/);
    assert.doesNotMatch(main, /Crash on start/);
    assert.match(main, /Open \(1\)[\s\S]*Closed \(1\)[\s\S]*All \(2\)/);
    main = await visit(`${repo}/issues?state=closed`, 'issues-closed');
    assert.match(main, /Crash on start/);
    assert.doesNotMatch(main, /Docs typo/);
    await page.locator('main table.list a', { hasText: 'Crash on start' }).click();
    assert.equal(
      decodeURIComponent(new URL(page.url()).pathname),
      `${repo}/issues/${f.dids.bob}/${f.issues.bobs.rkey}`,
    );
    await checkPage(page, cspErrors, 'issue');
    await page.screenshot({ path: path.join(shots, 'issue.png'), fullPage: true });
    main = await page.locator('main').innerText();
    assert.match(main, /Closed/);
    assert.match(main, /It <b>crashes<\/b>\./);
    assert.match(main, /carol\.test commented/);
    assert.match(main, /Same here\./);
  });

  it('a round whose pack is not a git pack: the page says so in one sentence, no diff, no 500', async () => {
    const junk = await f.w.carol.upload(
      new TextEncoder().encode('this is not a git pack, only text\n'.repeat(3)),
    );
    const bad = await f.w.carol.create('dev.knotless.pull', {
      repo: f.repoUri,
      base: 'main',
      head: { repo: f.repoUri, branch: 'junk' },
      title: 'Junk round',
      rounds: [{ head: 'e'.repeat(40), base: f.base, pack: junk, createdAt: at(90) }],
      createdAt: at(90),
    });
    await waitFor('the junk pull request', async () => {
      const r = await xrpc<{ pulls: { uri: string }[] }>(f.app, 'dev.knotless.listPulls', {
        repo: f.repoUri,
      });
      return r.pulls.some((p) => p.uri === bad.uri) ? true : undefined;
    });
    const main = await visit(`${repo}/pulls/${f.dids.carol}/${bad.rkey}`, 'pull-junk');
    assert.match(main, /The commits of this round cannot be shown: the round's pack is not a git pack\./);
    assert.equal(await page.locator('details.stat').count(), 0);
    assert.equal(await inAliceMirror('e'.repeat(40)), false);
  });

  it('the forge pages in dark mode and at phone width, without sideways scrolling', async () => {
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      for (const [url, shot] of [
        [repo, 'phone-repo'],
        [`${repo}/pulls?state=all`, 'phone-pulls'],
        [pullPath(), 'phone-pull'],
        [`${repo}/issues`, 'phone-issues'],
        [`${repo}/issues/${f.dids.bob}/${f.issues.bobs.rkey}`, 'phone-issue'],
      ] as const) {
        await visit(url, shot);
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(width <= 390, `${url} is ${width} px wide at phone width`);
      }
    } finally {
      await page.emulateMedia({ colorScheme: 'light' });
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });
});
