// Every notification leads to a page that opens for its reader, in Chromium on the dev network.
// Anyone can write a record naming any repository: carol writes issues and comments (straight to
// her PDS, as any client could) on alice's private repository, on one alice does not have, and on
// an issue she then deletes, each mentioning bob. None of them may reach alice's or bob's
// notifications, their header's count or their feeds (a private repository keeps no pull requests
// or issues, so its pages of them answer 404, and its name is not told to anyone by them); the
// notices about carol's issue on alice's public repository do, and every link opens.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { repoUri } from 'knotless-core/forge/records';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test']);
const alice = useGitUser(t, 'alice.test');

/** Words only the notices that must not be shown carry. */
const HIDDEN = ['secret', 'ghost', 'Sealed plans', 'Nowhere', 'Gone soon'];

let app: Appview;
const browsers: BrowserContext[] = [];

/** carol's PDS session: records written straight into her account, as any client could. */
async function carol(): Promise<{
  create(collection: string, record: Record<string, unknown>): Promise<{ uri: string; rkey: string }>;
  remove(collection: string, rkey: string): Promise<void>;
}> {
  const pds = t.pdsOf['carol.test']!;
  const login = await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'carol.test', password: t.password }),
  });
  assert.equal(login.status, 200);
  const { accessJwt } = (await login.json()) as { accessJwt: string };
  const call = async (nsid: string, body: Record<string, unknown>): Promise<{ uri?: string }> => {
    const res = await fetch(`${pds}/xrpc/${nsid}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${accessJwt}` },
      body: JSON.stringify({ repo: t.dids['carol.test'], ...body }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    return (await res.json()) as { uri?: string };
  };
  return {
    async create(collection, record) {
      const { uri } = await call('com.atproto.repo.createRecord', {
        collection,
        record: { $type: collection, ...record, createdAt: new Date().toISOString() },
      });
      return { uri: uri!, rkey: uri!.split('/').pop()! };
    },
    async remove(collection, rkey) {
      await call('com.atproto.repo.deleteRecord', { collection, rkey });
    },
  };
}

/**
 * Signs `handle` in, reads the header's count, opens the notifications page and follows each of
 * its links, then its feed's: every one must open (2xx). Returns the page's text.
 */
async function followEvery(handle: string): Promise<string> {
  const browser = await launchBrowser();
  browsers.push(browser);
  const { page, cspErrors } = await watchedPage(browser);
  await signIn(page, app.url, handle, t.password);
  await page.goto(`${app.url}/`);
  const count = Number(await page.locator('header a[href="/-/notifications"] .pill').innerText());
  const opened = await page.goto(`${app.url}/-/notifications`);
  assert.equal(opened?.status(), 200);
  await checkPage(page, cspErrors, `${handle}'s notifications`);
  const text = await page.locator('main').innerText();
  const links = await page
    .locator('main table.list a')
    .evaluateAll((as) => as.map((a) => (a as HTMLAnchorElement).href));
  assert.equal(count, links.length, `${handle}'s header counts the notices the page shows`);
  for (const link of links) {
    const res = await page.goto(link);
    assert.ok(res !== null && res.status() < 400, `${handle}: ${link} answers ${res?.status()}`);
  }
  await page.goto(`${app.url}/-/notifications`);
  await page.getByRole('button', { name: 'Make a new feed address' }).click();
  const feed = await fetch(await page.locator('.feedurl').innerText());
  assert.equal(feed.status, 200);
  const xml = await feed.text();
  const entries = [...xml.matchAll(/<link href="([^"]+)"\/>/g)]
    .map((m) => m[1]!.replace(/&amp;/g, '&'))
    .filter((u) => !u.endsWith('/-/notifications'));
  assert.equal(entries.length, links.length, `${handle}'s feed has the page's notices`);
  for (const link of entries) {
    const res = await page.goto(link);
    assert.ok(res !== null && res.status() < 400, `${handle}'s feed: ${link} answers ${res?.status()}`);
  }
  for (const word of HIDDEN) assert.equal(xml.includes(word), false, `${handle}'s feed names ${word}`);
  return text;
}

describe('notifications lead only to pages that open for their reader', () => {
  before(async () => {
    await t.ready;
    const dir = t.tmpdir();
    app = await appviewOn(t, path.join(dir, 'index.sqlite'), dir);
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, work, { 'README.md': '# Site\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    assert.equal((await alice.knotless('repo', 'create', 'secret', '--private')).code, 0);
    const aliceDid = t.dids['alice.test']!;
    const c = await carol();
    const sealed = await c.create('dev.knotless.issue', {
      repo: repoUri(aliceDid, 'secret'),
      title: 'Sealed plans',
      body: '@bob.test look at this',
    });
    await c.create('dev.knotless.comment', { subject: sealed.uri, body: 'And this, @bob.test.' });
    await c.create('dev.knotless.issue', {
      repo: repoUri(aliceDid, 'ghost'),
      title: 'Nowhere',
      body: '@bob.test here',
    });
    const gone = await c.create('dev.knotless.issue', {
      repo: repoUri(aliceDid, 'site'),
      title: 'Gone soon',
      body: 'Soon gone.',
    });
    await c.create('dev.knotless.comment', { subject: gone.uri, body: '@bob.test before it goes' });
    await c.remove('dev.knotless.issue', gone.rkey);
    // Last: once the index has it, it has everything carol wrote before.
    const kept = await c.create('dev.knotless.issue', {
      repo: repoUri(aliceDid, 'site'),
      title: 'Still here',
      body: '@bob.test this one stays',
    });
    await c.create('dev.knotless.comment', { subject: kept.uri, body: 'Agreed, @bob.test.' });
    await waitFor("carol's records indexed", async () =>
      (await app.index.forge.comments('dev.knotless.issue', t.dids['carol.test']!, kept.rkey)).length > 0
        ? true
        : undefined,
    );
  });
  after(async () => {
    for (const b of browsers) await b.close();
    await app?.close();
  });

  it('bob, mentioned on each: only the notices whose pages open, and every link opens', async () => {
    const text = await followEvery('bob.test');
    assert.match(text, /carol\.test mentioned you on the issue “Still here”/);
    assert.match(text, /carol\.test mentioned you on the issue “Still here”[\s\S]*carol\.test mentioned you/);
    for (const word of HIDDEN) assert.equal(text.includes(word), false, `bob's notifications name ${word}`);
  });

  it('alice, owner of the repositories named: the same', async () => {
    const text = await followEvery('alice.test');
    assert.match(text, /carol\.test opened the issue “Still here”/);
    assert.match(text, /carol\.test commented on the issue “Still here”/);
    for (const word of HIDDEN) assert.equal(text.includes(word), false, `alice's notifications name ${word}`);
  });
});
