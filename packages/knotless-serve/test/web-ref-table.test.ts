// The appview's writers on a repository whose refs are in a ref table (format.md "The ref table"), in
// Chromium on the dev network: a file edited in the browser and a pull request merged there are
// written into the owner's table (read with its proof, written swapped on it), never as ref records
// every reader ignores once a table exists; git sees both, and the table as stored holds them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { lsRemote, tableHands } from '../../knotless/test/helpers/ref-table.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { mainOf, signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test']);
// The repository starts on ref records (KNOTLESS_REF_TABLE=0) and its table is written by hand from
// them, so that the records the appview's writers must leave alone are there.
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_REF_TABLE: '0', KNOTLESS_COMPACT: '0' }));
const { refRecords, writeTable, readTable } = tableHands(t, 'alice.test');
const url = 'knotless://alice.test/tsite';

let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let pullPath: string;
/** The ref records the table was made from: no write of the appview's may touch them. */
let records: Map<string, string | undefined>;

async function recordsNow(): Promise<Map<string, string | undefined>> {
  return new Map([...(await refRecords('tsite'))].map(([ref, r]) => [ref, r.target ?? r.symref]));
}

/** main as the owner's table holds it. */
async function tableMain(): Promise<string | undefined> {
  return (await readTable('tsite'))!.value.refs.find((r) => r.ref === 'refs/heads/main')?.target;
}

/** Waits until the appview's copy shows `tip` in main's history. */
async function mirrored(tip: string): Promise<void> {
  await waitFor(`the appview at ${tip.slice(0, 7)}`, async () => {
    const res = await fetch(`${app.url}/alice.test/tsite/commits/main`);
    return res.status === 200 && (await res.text()).includes(tip.slice(0, 7)) ? true : undefined;
  });
}

describe("the appview's writers on a repository on a ref table", () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
    assert.equal((await alice.knotless('repo', 'create', 'tsite')).code, 0);
    const work = await newRepo(alice, url);
    await commitFiles(alice, work, { 'README.md': '# Site\n', 'a.txt': 'one\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    await alice.ok(work, 'switch', '-q', '-c', 'topic');
    await commitFiles(alice, work, { 'topic.txt': 'topic\n' }, 'topic work');
    await alice.ok(work, 'push', '-q', 'origin', 'topic');
    const made = await refRecords('tsite');
    await writeTable(
      'tsite',
      [...made.values()]
        .filter((r) => r.target !== undefined)
        .map((r) => ({ ref: r.ref, target: r.target!, packs: r.packs })),
    );
    records = await recordsNow();
    const pr = JSON.parse(
      (
        await alice.knotless(
          'pr',
          'create',
          'alice.test/tsite',
          '--head',
          'alice.test/tsite:topic',
          '--title',
          'Topic',
          '--json',
        )
      ).stdout,
    ) as { uri: string };
    const [, , did, , rkey] = pr.uri.split('/');
    pullPath = `/alice.test/tsite/pulls/${did}/${rkey}`;
    await mirrored(await mainOf(alice, 'alice.test/tsite'));
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
  });

  it("an edit in the browser is written into the table, one commit on main's tip", async () => {
    const before = await mainOf(alice, 'alice.test/tsite');
    const seq = (await readTable('tsite'))!.value.seq;
    await page.goto(`${app.url}/alice.test/tsite/edit/main/a.txt`);
    assert.equal(await page.locator('input[name="base"]').inputValue(), before);
    await page.getByLabel('a.txt').fill('one\ntwo\n');
    await page.getByLabel('Commit message').fill('Edited in the browser');
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.request().method() === 'POST', { timeout: 0 }),
      page.getByRole('button', { name: 'Commit to main' }).click({ timeout: 0 }),
    ]);
    assert.ok(answer.status() === 303 || answer.status() === 200, String(answer.status()));
    const after = await mainOf(alice, 'alice.test/tsite');
    assert.notEqual(after, before);
    assert.equal(await tableMain(), after);
    assert.equal((await readTable('tsite'))!.value.seq, seq + 1);
    assert.deepEqual(await recordsNow(), records);
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    assert.equal(await alice.ok(`${dir}/c`, 'show', 'HEAD:a.txt'), 'one\ntwo\n');
    assert.equal((await alice.ok(`${dir}/c`, 'rev-parse', 'HEAD~1')).trim(), before);
    await checkPage(page, cspErrors, 'after the edit');
  });

  it('a merge in the browser is written into the table', async () => {
    const before = await mainOf(alice, 'alice.test/tsite');
    await mirrored(before);
    await page.goto(`${app.url}${pullPath}`);
    await page.getByRole('button', { name: 'Merge pull request' }).click();
    await page.locator('.st-merged').first().waitFor();
    const ls = lsRemote(await alice.ok(alice.dir(), 'ls-remote', url));
    const merged = ls.get('refs/heads/main')!;
    assert.notEqual(merged, before);
    assert.equal(await tableMain(), merged);
    assert.deepEqual(await recordsNow(), records);
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', url, 'c');
    const c = `${dir}/c`;
    assert.equal(await alice.ok(c, 'show', 'HEAD:topic.txt'), 'topic\n');
    assert.equal(await alice.ok(c, 'show', 'HEAD:a.txt'), 'one\ntwo\n');
    assert.equal((await alice.git(c, 'fsck', '--full')).code, 0);
    assert.equal((await alice.ok(c, 'rev-parse', 'HEAD^1')).trim(), before);
    await checkPage(page, cspErrors, 'after the merge');
  });
});
