// A hostile or absent maintainer on the web (format.md, `dev.knotless.protection`): alice owns the
// repositories and bob (on the other PDS, reached through a proxy his DID document names) maintains
// them. A record bob writes raw under his key that breaks the rules, or names another repository,
// protects nothing on the pages and at the merge button, and none of its text reaches a page; with
// bob's PDS unreachable the merge button answers the CLI's sentence naming him (not a 500) until
// alice removes him; and the merge button takes the maintainers from alice's table as it is now,
// not from an index that has not heard of bob being added, or removed, yet.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { setPdsEndpoint, startProxy, type Proxy } from 'knotless-devnet';
import { openPr } from '../../knotless/test/helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, get, maintainedRepo, waitFor } from './helpers.ts';
import { mainOf, signIn } from './web-forge-kit.ts';

// Two PDSes: alice on the first, bob on the second.
const t = useNetwork(['alice.test', 'bob.test'], { pdses: 2 });
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0' }));
/** bob's PDS as his DID document names it: a proxy in front of the second PDS, which can go down. */
let bobsPds: Proxy | undefined;
const bob = useGitUser(
  t,
  'bob.test',
  () => ({ KNOTLESS_COMPACT: '0' }),
  async (user) => {
    bobsPds = await startProxy({ target: t.pdsOf['bob.test']! });
    await setPdsEndpoint(t.net, t.dids['bob.test']!, bobsPds.url, 1);
    const res = await user.knotless('login', 'bob.test', '--app-password', t.password);
    assert.equal(res.code, 0, res.stderr);
  },
);

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-protect-hostile-'));
const database = path.join(dataDir, 'index.sqlite');
let app: Appview;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let work = '';
const logs: string[] = [];
/** What every hostile record carries, so that a page showing any of it is caught. */
const MARK = 'HOSTILEMARK';

/** Writes `record` in bob's account under `rkey` with putRecord, bypassing the CLI's checks. */
async function putRaw(rkey: string, record: Record<string, unknown>): Promise<void> {
  const pds = t.pdsOf['bob.test']!;
  const session = (await (
    await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: 'bob.test', password: t.password }),
    })
  ).json()) as { accessJwt: string; did: string };
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.putRecord`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
    body: JSON.stringify({
      repo: session.did,
      collection: 'dev.knotless.protection',
      rkey,
      validate: false,
      record: { $type: 'dev.knotless.protection', ...record },
    }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** A branch of alice's `repo` from main with one new file, pushed, and her pull request of it. */
async function pullOf(repo: string, branch: string): Promise<{ head: string; path: string }> {
  await alice.ok(work, 'switch', '-q', '-c', branch, 'main');
  const head = await commitFiles(alice, work, { [`${branch}.txt`]: `${branch}\n` }, `add ${branch}`);
  await alice.ok(work, 'push', '-q', 'origin', branch);
  const pr = await openPr(alice, `alice.test/${repo}`, `${repo}:${branch}`, `Add ${branch}`);
  const rkey = pr.uri.split('/').at(-1)!;
  const where = `/alice.test/${repo}/pulls/${t.dids['alice.test']!}/${rkey}`;
  await waitFor(`the pull request ${branch} indexed`, async () => {
    const res = await fetch(`${app.url}${where}`);
    return res.status === 200 && (await res.text()).includes(`${branch}.txt`) ? true : undefined;
  });
  return { head, path: where };
}

/** Loads `where` until its `.merge-checks` says `text` (the index follows the PDSes' streams). */
async function shows(where: string, text: RegExp): Promise<void> {
  await waitFor(`${where} showing ${String(text)}`, async () => {
    await page.goto(`${app.url}${where}`);
    const el = page.locator('.merge-checks');
    return (await el.count()) > 0 && text.test(await el.first().innerText()) ? true : undefined;
  });
}

/** Clicks a button that posts; returns the answer's status and the page's text after it. */
async function post(button: string): Promise<{ status: number; text: string }> {
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST'),
    page.getByRole('button', { name: button }).click(),
  ]);
  const status = answer.status();
  await page.waitForLoadState();
  return { status, text: await page.locator('body').innerText() };
}

/** alice's check on `commit` of her `repo`, written with the CLI. */
async function aliceChecks(repo: string, commit: string, context: string): Promise<void> {
  const res = await alice.knotless(
    'check',
    'set',
    `alice.test/${repo}`,
    commit,
    '--context',
    context,
    '--state',
    'success',
  );
  assert.equal(res.code, 0, res.stderr);
}

const bobKey = (repo: string) => `${repo}~${t.dids['alice.test']!}`;

describe('a hostile or absent maintainer cannot break branch protection on the web', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, database, dataDir, {}, (line) => logs.push(line));
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await bobsPds?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("a maintainer's malformed or misdirected record protects nothing on the pages and at the merge button, and none of it is shown", async () => {
    ({ work } = await maintainedRepo(app, { user: alice, handle: 'alice.test' }, 'site', 'bob.test'));
    // The appview knows a dev network's handle from its index: alice signs in once it has her.
    await signIn(page, app.url, 'alice.test', t.password);
    const mine = await alice.knotless('repo', 'protect', 'site', 'main', '--require-check', 'test');
    assert.equal(mine.code, 0, mine.stderr);
    const pr = await pullOf('site', 'feature');
    const hostile: [string, Record<string, unknown>][] = [
      [
        'a branch name with control characters',
        {
          repo: `at://${t.dids['alice.test']!}/dev.knotless.repo/site`,
          branches: [{ branch: `main\u001b[31m${MARK}\u0007`, requiredChecks: [MARK] }],
          createdAt: new Date().toISOString(),
        },
      ],
      ['wrong types', { repo: 42, branches: { branch: MARK }, createdAt: MARK }],
      [
        'another repository named',
        {
          repo: `at://${t.dids['alice.test']!}/dev.knotless.repo/other`,
          branches: [{ branch: 'main', requiredChecks: [MARK] }],
          createdAt: new Date().toISOString(),
        },
      ],
    ];
    for (const [what, record] of hostile) {
      // bob's valid requirement first, shown; then the hostile record replaces it, and the
      // requirement is gone from the page: the index took the record and it counts for nothing.
      const his = await bob.knotless('repo', 'protect', 'alice.test/site', 'main', '--require-check', 'lint');
      assert.equal(his.code, 0, his.stderr);
      await shows(pr.path, /lint: no check by a trusted runner yet \(required by bob\.test\)/);
      await putRaw(bobKey('site'), record);
      await shows(
        pr.path,
        /^Not mergeable yet: the required checks have not passed: test: no check by a trusted runner yet\.$/,
      );
      await checkPage(page, cspErrors, `pull request beside a maintainer's record with ${what}`);
      assert.ok(!(await page.content()).includes(MARK), `${what}: the record's text reached the page`);
      for (const where of ['/alice.test/site', '/alice.test/site/branches']) {
        const got = await get(`${app.url}${where}`);
        assert.equal(got.status, 200, `${what}: ${where}`);
        assert.ok(!got.text.includes(MARK), `${what}: the record's text reached ${where}`);
      }
      // The merge button reads bob's record from his PDS, skips it, and waits only for alice's test.
      const refused = await post('Merge pull request');
      assert.equal(refused.status, 409, `${what}: ${refused.text}`);
      assert.match(
        refused.text,
        /waits for the required checks of main on [0-9a-f]{12}: test: no check by a trusted runner yet; nothing was merged/,
      );
      assert.ok(!refused.text.includes(MARK), `${what}: the record's text reached the refusal`);
      await page.goto(`${app.url}${pr.path}`);
    }
    assert.ok(!logs.some((l) => l.includes('\u001b')), 'a control character reached the log');
    await aliceChecks('site', pr.head, 'test');
    await shows(pr.path, /^Can be merged: the required checks of main have passed\.$/);
    const merged = await post('Merge pull request');
    assert.equal(merged.status, 303, merged.text);
    assert.equal(await mainOf(alice, 'alice.test/site'), pr.head);
  });

  it("with bob's PDS unreachable the merge button says so, naming him, until alice removes him", async () => {
    await alice.ok(work, 'switch', '-q', 'main');
    await alice.ok(work, 'pull', '-q', 'origin', 'main');
    const his = await bob.knotless('repo', 'protect', 'alice.test/site', 'main', '--require-check', 'lint');
    assert.equal(his.code, 0, his.stderr);
    const pr = await pullOf('site', 'down');
    await aliceChecks('site', pr.head, 'test');
    await shows(pr.path, /lint: no check by a trusted runner yet \(required by bob\.test\)/);
    const start = await mainOf(alice, 'alice.test/site');
    bobsPds!.inject({ fault: { kind: 'drop' }, times: Infinity });
    const down = await post('Merge pull request');
    assert.equal(down.status, 502, down.text);
    assert.match(
      down.text,
      new RegExp(
        `The branch protection that maintainer ${t.dids['bob.test']!} keeps for at://${t.dids['alice.test']!}/dev\\.knotless\\.repo/site could not be read \\(.*\\); a maintainer's requirements are never left out, so try again later, or the owner can remove the maintainer\\.`,
      ),
    );
    assert.doesNotMatch(down.text, /\n\s+at /, 'a stack on the page');
    assert.equal(await mainOf(alice, 'alice.test/site'), start, 'main moved');

    // The remedy: alice removes bob (his table cannot be read, and nothing of his was needed).
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'site', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    await shows(pr.path, /^Can be merged: the required checks of main have passed\.$/);
    const merged = await post('Merge pull request');
    assert.equal(merged.status, 303, merged.text);
    assert.equal(await mainOf(alice, 'alice.test/site'), pr.head);
    bobsPds!.clearFaults();
  });

  it("the merge button counts the maintainers alice's table lists now, whatever the index has heard of", async () => {
    assert.equal((await alice.knotless('repo', 'create', 'stale')).code, 0);
    work = await newRepo(alice, 'knotless://alice.test/stale');
    await commitFiles(alice, work, { 'README.md': '# Stale\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const mine = await alice.knotless('repo', 'protect', 'stale', 'main', '--require-check', 'test');
    assert.equal(mine.code, 0, mine.stderr);
    const pr = await pullOf('stale', 'late');
    await aliceChecks('stale', pr.head, 'test');
    await shows(pr.path, /^Can be merged: the required checks of main have passed\.$/);
    await app.idle();
    // The appview stops following the PDSes: what alice and bob write from here on never reaches
    // its index, which still has no maintainer of stale.
    await app.close();
    app = await appviewOn(t, database, dataDir, { firehoses: [] }, (line) => logs.push(line));
    const start = await mainOf(alice, 'alice.test/stale');
    const add = await alice.knotless('repo', 'maintainer', 'add', 'stale', 'bob.test');
    assert.equal(add.code, 0, add.stderr);
    const his = await bob.knotless('repo', 'protect', 'alice.test/stale', 'main', '--require-check', 'lint');
    assert.equal(his.code, 0, his.stderr);
    // The page, from the index, still offers the merge; the merge itself reads alice's table now.
    await page.goto(`${app.url}${pr.path}`);
    await page.getByText('Signed in as alice.test').waitFor();
    assert.match(
      await page.locator('.merge-checks').first().innerText(),
      /^Can be merged: the required checks of main have passed\.$/,
    );
    const refused = await post('Merge pull request');
    assert.equal(refused.status, 409, refused.text);
    assert.match(
      refused.text,
      /waits for the required checks of main on [0-9a-f]{12}: lint: no check by a trusted runner yet \(required by bob\.test\); nothing was merged/,
    );
    assert.equal(await mainOf(alice, 'alice.test/stale'), start, "main moved past bob's requirement");

    // The other way: the index follows again until its page names bob's requirement, then stops
    // before alice removes him. Its page still names him; the merge button, reading her table now,
    // counts his requirement for nothing.
    await app.close();
    app = await appviewOn(t, database, dataDir, {}, (line) => logs.push(line));
    await shows(pr.path, /lint: no check by a trusted runner yet \(required by bob\.test\)/);
    await app.idle();
    await app.close();
    app = await appviewOn(t, database, dataDir, { firehoses: [] }, (line) => logs.push(line));
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'stale', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    await page.goto(`${app.url}${pr.path}`);
    assert.match(await page.locator('.merge-checks').first().innerText(), /required by bob\.test/);
    const merged = await post('Merge pull request');
    assert.equal(merged.status, 303, merged.text);
    assert.equal(await mainOf(alice, 'alice.test/stale'), pr.head);
  });
});
