// A private repository's pages lead nowhere that fails, in Chromium on the dev network: every link
// on them answers, and every form on them is taken, for its owner, a member it is shared with, an
// account it is not shared with and a reader signed out. The appview holds nothing of its contents
// (its refs are sealed), so it offers nothing that would need them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page, Response } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { launchBrowser } from './browser-kit.ts';
import { appviewOn, get, waitFor } from './helpers.ts';
import { signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test']);
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

let app: Appview;
const SCOPE = '/alice.test/hidden';

/** A value each kind of field takes. */
function valueFor(type: string): string {
  if (type === 'url') return `${app.url}/-/hook`;
  if (type === 'email') return 'walk@example.com';
  if (type === 'number') return '1';
  return 'Written by the walk';
}

/**
 * Walks the repository's pages from its front page as `page`'s reader: each page reached by a link
 * under the repository, each link on them (within the appview) fetched, and each form on them whose
 * action is the repository's filled in and submitted. Returns every answer of 400 or more, as
 * "<status> <what> (on <page>)".
 */
async function walk(page: Page): Promise<string[]> {
  const failures: string[] = [];
  const seen = new Set<string>();
  const checked = new Set<string>();
  const queue = [`${app.url}${SCOPE}`];
  const request = page.context().request;
  while (queue.length > 0) {
    const url = queue.shift()!;
    if (seen.has(url)) continue;
    seen.add(url);
    const answer = await page.goto(url);
    const on = new URL(url).pathname;
    if ((answer?.status() ?? 0) >= 400) {
      failures.push(`${answer?.status()} GET ${on}`);
      continue;
    }
    const links = await page
      .locator('a[href]')
      .evaluateAll((as) => as.map((a) => (a as HTMLAnchorElement).href));
    for (const link of links) {
      const target = new URL(link);
      if (target.origin !== app.url) continue;
      target.hash = '';
      const key = target.href;
      if (target.pathname.startsWith(`${SCOPE}/`) || target.pathname === SCOPE) {
        queue.push(key);
        continue;
      }
      if (checked.has(key)) continue;
      checked.add(key);
      const status = (await request.get(key, { maxRedirects: 5 })).status();
      if (status >= 400) failures.push(`${status} link ${target.pathname}${target.search} (on ${on})`);
    }
    const forms = await page
      .locator('form')
      .evaluateAll((fs) => fs.map((f) => new URL((f as HTMLFormElement).action).pathname));
    for (let i = 0; i < forms.length; i++) {
      if (!forms[i]!.startsWith(SCOPE)) continue;
      // The page again for each form: the one before may have moved it on.
      await page.goto(url);
      // A form an earlier one removed (a webhook, say) is gone.
      if ((await page.locator('form').count()) <= i) continue;
      const form = page.locator('form').nth(i);
      for (const field of await form.locator('input:visible, textarea:visible').all()) {
        const type = (await field.getAttribute('type')) ?? 'text';
        if (['submit', 'checkbox', 'radio', 'hidden'].includes(type)) continue;
        if ((await field.inputValue()) === '') await field.fill(valueFor(type));
      }
      const answers: number[] = [];
      const onDocument = (r: Response) => {
        if (r.request().resourceType() === 'document' && r.request().frame() === page.mainFrame())
          answers.push(r.status());
      };
      page.on('response', onDocument);
      try {
        await Promise.all([
          page.waitForResponse((r) => r.request().method() === 'POST'),
          form.locator('button[type="submit"], button:not([type]), input[type="submit"]').first().click(),
        ]);
        await page.waitForLoadState();
      } finally {
        page.off('response', onDocument);
      }
      for (const status of answers.filter((s) => s >= 400))
        failures.push(`${status} form POST ${forms[i]} (on ${on})`);
    }
  }
  assert.ok(seen.size > 0);
  return failures;
}

describe("a private repository's pages", () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal((await alice.knotless('repo', 'create', 'hidden', '--private')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/hidden');
    await commitFiles(alice, work, { 'README.md': '# Hidden\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main', 'main:topic');
    await alice.ok(work, 'tag', 'v1');
    await alice.ok(work, 'push', '-q', 'origin', 'v1');
    // bob is a member: the repository's key is wrapped to his device.
    assert.equal((await bob.knotless('key', 'list')).code, 0);
    const shared = await alice.knotless('repo', 'share', 'hidden', 'bob.test');
    assert.equal(shared.code, 0, shared.stderr);
    // A public repository pushed after it: the appview learns of alice from its refs.
    assert.equal((await alice.knotless('repo', 'create', 'shown')).code, 0);
    const pub = await newRepo(alice, 'knotless://alice.test/shown');
    await commitFiles(alice, pub, { 'a.txt': 'a\n' }, 'public');
    await alice.ok(pub, 'push', '-q', 'origin', 'main');
    await waitFor('the repository indexed as private', async () => {
      const res = await get(`${app.url}${SCOPE}`);
      return res.status === 200 && res.text.includes('A private repository') ? true : undefined;
    });
  });
  after(async () => {
    await app?.close();
  });

  for (const [who, handle] of [
    ['its owner', 'alice.test'],
    ['a member', 'bob.test'],
    ['an account it is not shared with', 'carol.test'],
    ['a reader signed out', undefined],
  ] as const)
    it(`as ${who}: every link answers and every form is taken`, async () => {
      const browser: BrowserContext = await launchBrowser();
      try {
        const page = await browser.newPage();
        if (handle !== undefined) await signIn(page, app.url, handle, t.password);
        assert.deepEqual(await walk(page), []);
      } finally {
        await browser.close();
      }
    });
});
