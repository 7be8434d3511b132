// The merge button writes what `knotless pr merge` writes (format.md, "Large blobs on their own"): a
// merge commit made in the browser adds a structure pack, a pack of the small blobs and a pack of
// each blob over 1 MiB alone (its id and size in the list), so that a `--filter=blob:limit=1m` clone
// of the merged main downloads none of the large blob's bytes. In Chromium on the dev network; the
// pack list is read from the owner's account in whichever layout it is stored.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { startProxy, type Proxy } from 'knotless-devnet';
import { joinRefTable, parseRefTable } from 'knotless-core/records/ref-table';
import type { PackEntry } from 'knotless-core/records/ref-record';
import { openPr } from '../../knotless/test/helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { tableHands } from '../../knotless/test/helpers/ref-table.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { mainOf, signIn } from './web-forge-kit.ts';

const MIB = 1024 * 1024;
const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test');
let proxy: Proxy | undefined;
// bob clones through a proxy that counts the blobs he downloads; his cache starts cold, and no agent
// of his carries requests past it.
const bob = useGitUser(t, 'bob.test', () => ({
  KNOTLESS_AGENT: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));
const { refRecords, readTable } = tableHands(t, 'alice.test');
const url = 'knotless://alice.test/msite';

let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let pullPath: string;
let bigOid: string;
const big = crypto.randomBytes(2 * MIB);

/** main's pack list as the owner's account holds it: from her table when she has one, else from its record. */
async function mainPacks(): Promise<PackEntry[]> {
  const stored = await readTable('msite');
  if (stored !== undefined) {
    const table = parseRefTable(stored.value, `at://${t.dids['alice.test']!}/dev.knotless.repo/msite`, true);
    assert.equal(table.parts.length, 0, 'a table this small has no parts');
    const main = joinRefTable(table, []).refs.find((r) => r.ref === 'refs/heads/main');
    assert.ok(main !== undefined, 'the table has no main');
    return main.packs;
  }
  const main = (await refRecords('msite')).get('refs/heads/main');
  assert.ok(main !== undefined, 'no record of main');
  return main.packs;
}

describe('the merge button writes large blobs in packs of their own', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal((await alice.knotless('repo', 'create', 'msite')).code, 0);
    const work = await newRepo(alice, url);
    await commitFiles(alice, work, { 'README.md': '# Site\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await alice.ok(work, 'switch', '-q', '-c', 'feature');
    fs.writeFileSync(path.join(work, 'big'), big);
    await commitFiles(alice, work, { 'note.txt': 'a note\n' }, 'feature: a large file');
    bigOid = (await alice.ok(work, 'rev-parse', 'HEAD:big')).trim();
    await alice.ok(work, 'push', '-q', 'origin', 'feature');
    // main moves on, so that the merge makes a commit of its own (not a fast-forward).
    await alice.ok(work, 'switch', '-q', 'main');
    await commitFiles(alice, work, { 'other.txt': 'other\n' }, 'main moves');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const pr = await openPr(alice, 'alice.test/msite', 'alice.test/msite:feature', 'Large');
    const [, , did, , rkey] = pr.uri.split('/');
    pullPath = `/alice.test/msite/pulls/${did}/${rkey}`;
    const tip = await mainOf(alice, 'alice.test/msite');
    await waitFor(`the appview at ${tip.slice(0, 7)}`, async () => {
      const res = await fetch(`${app.url}/alice.test/msite/commits/main`);
      return res.status === 200 && (await res.text()).includes(tip.slice(0, 7)) ? true : undefined;
    });
    await waitFor('the pull request indexed', async () =>
      (await fetch(`${app.url}${pullPath}`)).status === 200 ? true : undefined,
    );
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    await signIn(page, app.url, 'alice.test', t.password);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await proxy?.close();
  });

  it('a merge commit made in the browser adds the structure, the small blobs and the large blob alone', async () => {
    const beforeTip = await mainOf(alice, 'alice.test/msite');
    const beforePacks = await mainPacks();
    await page.goto(`${app.url}${pullPath}`);
    await page.getByRole('button', { name: 'Merge pull request' }).click();
    await page.locator('.st-merged').first().waitFor();
    await checkPage(page, cspErrors, 'after the merge');
    const merged = await mainOf(alice, 'alice.test/msite');
    assert.notEqual(merged, beforeTip);

    const afterPacks = await mainPacks();
    assert.deepEqual(
      afterPacks.slice(0, beforePacks.length).map((p) => p.id),
      beforePacks.map((p) => p.id),
    );
    const added = afterPacks.slice(beforePacks.length);
    assert.deepEqual(
      added.map((p) => p.holds?.kind),
      ['structure', 'blobs', 'blob'],
    );
    const large = added[2]!.holds;
    assert.ok(large?.kind === 'blob');
    assert.equal(large.oid, bigOid);
    assert.equal(large.blobSize, 2 * MIB);
    const largeCids = new Set((added[2]!.parts ?? []).map((p) => p.ref.$link));
    assert.ok(largeCids.size > 0);

    // A blob:limit=1m clone of the merged main downloads none of the large blob; its checkout does.
    proxy = await startProxy({ target: t.pdsOf['alice.test'] ?? t.net.pdsUrl });
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', '--no-checkout', '--filter=blob:limit=1m', url, 'c');
    const blobsAsked = () =>
      proxy!.requests
        .filter((r) => r.nsid === 'com.atproto.sync.getBlob')
        .map((r) => new URL(r.path, 'http://x').searchParams.get('cid') ?? '');
    assert.ok(proxy.requests.length > 0, 'the clone went through the proxy');
    assert.deepEqual(
      blobsAsked().filter((c) => largeCids.has(c)),
      [],
    );
    const c = path.join(dir, 'c');
    assert.equal((await bob.ok(c, 'rev-parse', 'HEAD')).trim(), merged);
    await bob.ok(c, 'checkout', '-q', 'main');
    assert.deepEqual(
      blobsAsked()
        .filter((x) => largeCids.has(x))
        .sort(),
      [...largeCids].sort(),
    );
    assert.ok(fs.readFileSync(path.join(c, 'big')).equals(big));
    assert.equal((await bob.ok(c, 'rev-parse', 'HEAD^1')).trim(), beforeTip);
    assert.equal((await bob.git(c, 'fsck', '--full')).code, 0);
  });
});
