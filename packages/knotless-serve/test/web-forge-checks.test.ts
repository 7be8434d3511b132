// Required checks on the web, as on the CLI: bob (as a runner alice trusts) writes a failing check
// on his pull request's head; alice requires it on main; in Chromium her merge button refuses,
// naming the check, and nothing moves; bob writes a success and the same button merges. A second
// button merges without the checks, only for alice, and the merged status in her account records
// what it overrode, which the pull request's page and the CLI both show. The commit page, the branch
// list, the repository page and bob's notifications show the checks from the index.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Cookie, Page } from 'playwright-core';
import { openPr, writeManyRaw, writeRaw } from '../../knotless/test/helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { listOwn, mainOf, signIn } from './web-forge-kit.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test']);
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

let app: Appview;
let pg: PgServer | undefined;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let bobCookies: Cookie[];
let start = '';
let bobClone = '';
/** What the appview logged. */
const logged: string[] = [];

/** bob's check on `commit` of alice's site, written with the CLI into his own account. */
async function check(commit: string, state: string): Promise<void> {
  const res = await bob.knotless(
    'check',
    'set',
    'alice.test/site',
    commit,
    '--context',
    'test',
    '--state',
    state,
  );
  assert.equal(res.code, 0, res.stderr);
}

/** A branch of bob's fork from alice's main with one new file, pushed, and his pull request of it. */
async function pullOf(branch: string): Promise<{ head: string; path: string; id: string }> {
  await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site', 'main');
  await bob.ok(bobClone, 'switch', '-q', '-c', branch, 'FETCH_HEAD');
  const head = await commitFiles(bob, bobClone, { [`${branch}.txt`]: `${branch}\n` }, `bob adds ${branch}`);
  await bob.ok(bobClone, 'push', '-q', 'origin', branch);
  const pr = await openPr(bob, 'alice.test/site', `bob.test/site:${branch}`, `Add ${branch}`);
  const rkey = pr.uri.split('/').at(-1)!;
  const where = `/alice.test/site/pulls/${t.dids['bob.test']!}/${rkey}`;
  // The appview has the pull request, and the round's commits, once its page shows the new file.
  await waitFor(`the pull request ${branch} indexed`, async () => {
    const res = await fetch(`${app.url}${where}`);
    return res.status === 200 && (await res.text()).includes(`${branch}.txt`) ? true : undefined;
  });
  return { head, path: where, id: pr.id };
}

/** Loads `where` until its `selector` says `text` (the index follows the PDSes' streams). */
async function shows(where: string, selector: string, text: RegExp): Promise<void> {
  await waitFor(`${where} showing ${String(text)}`, async () => {
    await page.goto(`${app.url}${where}`);
    const el = page.locator(selector);
    return (await el.count()) > 0 && text.test(await el.first().innerText()) ? true : undefined;
  });
}

/** Clicks a button that posts, and returns the answer's status. */
async function post(button: string): Promise<number> {
  const [answer] = await Promise.all([
    page.waitForResponse((r) => r.request().method() === 'POST'),
    page.getByRole('button', { name: button }).click(),
  ]);
  return answer.status();
}

describe('required checks on the web merge as on the CLI', () => {
  before(async () => {
    await t.ready;
    if (process.env['KNOTLESS_TEST_INDEX'] === 'postgres') pg = await startPostgres();
    app = await appviewOn(
      t,
      pg === undefined ? ':memory:' : await pg.createDatabase('webchecks'),
      undefined,
      {},
      (line) => logged.push(line),
    );
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    const work = await newRepo(alice, 'knotless://alice.test/site');
    start = await commitFiles(alice, work, { 'README.md': '# Site\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    bobClone = path.join(bob.dir(), 'c');
    await bob.ok(path.dirname(bobClone), 'clone', '-q', 'knotless://bob.test/site', 'c');
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    bobCookies = await signIn(page, app.url, 'bob.test', t.password);
    await browser.clearCookies();
    await signIn(page, app.url, 'alice.test', t.password);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await pg?.stop();
  });

  it("bob's failing check refuses alice's merge button, naming it; his success lets the same button merge", async () => {
    const pr = await pullOf('feature');
    await check(pr.head, 'failure');
    const protect = await alice.knotless(
      'repo',
      'protect',
      'site',
      'main',
      '--require-check',
      'test',
      '--runner',
      'bob.test',
    );
    assert.equal(protect.code, 0, protect.stderr);

    // The page judges from the index: it says why not once the check and the protection are in.
    await shows(
      pr.path,
      '.merge-checks',
      /^Not mergeable yet: the required checks have not passed: test: failing \(failure by bob\.test\)\.$/,
    );
    await checkPage(page, cspErrors, 'pull request waiting for its checks');
    assert.match(await page.locator('#checks').innerText(), /test failed by bob\.test/);
    assert.equal(await post('Merge pull request'), 409);
    const refusal = await page.locator('main').innerText();
    assert.match(
      refusal,
      /^409\s+\S+ waits for the required checks of main on [0-9a-f]{12}: test: failing \(failure by bob\.test\); nothing was merged \("Merge without checks" merges anyway, and says so on the pull request\)\.$/,
    );
    assert.ok(refusal.includes(pr.head.slice(0, 12)), refusal);
    // The CLI refuses the same merge in the same words, but for how to override it.
    const cli = await alice.knotless('pr', 'merge', 'alice.test/site', pr.id);
    assert.equal(cli.code, 20, cli.stderr);
    const words = /waits for .*; nothing was merged/.exec(refusal)![0];
    assert.ok(cli.stderr.includes(words), cli.stderr);
    assert.equal(await mainOf(alice, 'alice.test/site'), start, 'main has not moved');
    assert.equal((await listOwn(t, 'alice.test', 'dev.knotless.pull.status')).length, 0);

    await check(pr.head, 'success');
    await shows(pr.path, '.merge-checks', /^Can be merged: the required checks of main have passed\.$/);
    assert.equal(await page.getByRole('button', { name: 'Merge without checks' }).count(), 0);
    assert.equal(await post('Merge pull request'), 303);
    await page.locator('.st-merged').first().waitFor();
    assert.equal(await mainOf(alice, 'alice.test/site'), pr.head);
    const statuses = await listOwn(t, 'alice.test', 'dev.knotless.pull.status');
    assert.equal(statuses.length, 1);
    assert.equal(statuses[0]!.value['merged'], pr.head);
    assert.equal(statuses[0]!.value['ignoredChecks'], undefined);
    assert.equal(await page.locator('.ignored-checks').count(), 0);
    // A check that counts failing on bob's round is in his notifications (alice's: the owner's count).
    const alices = await browser.cookies(app.url);
    const said = await alice.knotless(
      'check',
      'set',
      'alice.test/site',
      pr.head,
      '--context',
      'docs',
      '--state',
      'failure',
    );
    assert.equal(said.code, 0, said.stderr);
    await browser.clearCookies();
    await browser.addCookies(bobCookies);
    await shows(
      '/-/notifications',
      'main',
      /alice\.test's check “docs” failed on your pull request “Add feature”/,
    );
    await checkPage(page, cspErrors, 'notifications with a failing check');
    await browser.clearCookies();
    await browser.addCookies(alices);
    // main's tip is the round's head: its check shows on the commit page, the branch list and the
    // repository page's latest commit.
    await shows(
      `/alice.test/site/commit/${pr.head}`,
      '#checks',
      /docs failed by alice\.test[\s\S]*test passed by bob\.test/,
    );
    await checkPage(page, cspErrors, 'commit page with its checks');
    await shows('/alice.test/site/branches', '.ck-badge', /1\/2 checks passed/);
    await checkPage(page, cspErrors, 'branch list with checks');
    await shows('/alice.test/site', '.latest .ck-badge', /1\/2 checks passed/);
  });

  it('"Merge without checks" is alice\'s alone; it records what it overrode, and the page, getPull and the CLI show it', async () => {
    const pr = await pullOf('hurry');
    await check(pr.head, 'failure');
    await shows(pr.path, '.merge-checks', /^Not mergeable yet: .*test: failing \(failure by bob\.test\)\.$/);
    const form = page.locator('form[action$="/merge-without-checks"]');
    const fields = {
      head: await form.locator('input[name="head"]').inputValue(),
      base: await form.locator('input[name="base"]').inputValue(),
    };
    // bob, signed in, posting his own token: refused, as the owner's merge is.
    const alices = await browser.cookies(app.url);
    await browser.clearCookies();
    await browser.addCookies(bobCookies);
    await page.goto(`${app.url}${pr.path}`);
    assert.equal(await page.getByRole('button', { name: 'Merge without checks' }).count(), 0);
    const csrf = await page.locator('form[action="/-/signout"] input[name="csrf"]').inputValue();
    const denied = await page.request.post(`${app.url}${pr.path}/merge-without-checks`, {
      form: { ...fields, csrf },
    });
    assert.equal(denied.status(), 403);
    assert.match(await denied.text(), /Only alice\.test\/site&#39;s owner can merge it; you are bob\.test\./);
    const before = await mainOf(alice, 'alice.test/site');

    await browser.clearCookies();
    await browser.addCookies(alices);
    await page.goto(`${app.url}${pr.path}`);
    await checkPage(page, cspErrors, 'pull request with the merge without checks button');
    assert.equal(await post('Merge without checks'), 303);
    await page.locator('.st-merged').first().waitFor();
    assert.notEqual(await mainOf(alice, 'alice.test/site'), before);
    const statuses = await listOwn(t, 'alice.test', 'dev.knotless.pull.status');
    const merged = statuses.find((s) => String(s.value['pull']).endsWith(pr.path.split('/').at(-1)!));
    assert.deepEqual(merged?.value['ignoredChecks'], ['test: failing (failure by bob.test)']);
    await checkPage(page, cspErrors, 'pull request merged without its checks');
    assert.equal(
      await page.locator('.ignored-checks').innerText(),
      'Merged without its required checks: test: failing (failure by bob.test).',
    );
    const got = await xrpc<{ pull: { state: string; ignoredChecks?: string[] } }>(
      app,
      'dev.knotless.getPull',
      {
        uri: `at://${t.dids['bob.test']!}/dev.knotless.pull/${pr.path.split('/').at(-1)!}`,
      },
    );
    assert.deepEqual(got.pull.ignoredChecks, ['test: failing (failure by bob.test)']);
    const view = await bob.knotless('pr', 'view', 'alice.test/site', pr.id, '--json');
    assert.equal(view.code, 0, view.stderr);
    assert.deepEqual((JSON.parse(view.stdout) as { ignoredChecks?: string[] }).ignoredChecks, [
      'test: failing (failure by bob.test)',
    ]);
  });

  it('dev.knotless.listChecks answers from the index: a run linked only when http(s), control characters and other commits shown nowhere', async () => {
    const tip = await mainOf(alice, 'alice.test/site');
    const raw = (record: Record<string, unknown>) =>
      writeRaw(t, 'bob.test', 'dev.knotless.check', {
        repo: `at://${t.dids['alice.test']!}/dev.knotless.repo/site`,
        commit: tip,
        state: 'success',
        createdAt: new Date().toISOString(),
        ...record,
      });
    await raw({ context: 'lint', targetUrl: 'https://ci.example/run/1', description: 'all clean' });
    const hostile = [
      await raw({ context: 'te\x1b[2Jst' }),
      await raw({ context: 'script', targetUrl: 'javascript:alert(1)' }),
    ];
    // A check on a commit the repository does not hold.
    await raw({ context: 'ghost', commit: 'e'.repeat(40) });
    await waitFor('the hostile checks skipped', () =>
      Promise.resolve(
        hostile.every((uri) => logged.some((l) => l.includes(uri.split('/').at(-1)!))) ? true : undefined,
      ),
    );
    const listed = await waitFor('lint indexed', async () => {
      const v = await xrpc<{ checks: { uri: string; context: string; targetUrl?: string }[] }>(
        app,
        'dev.knotless.listChecks',
        {
          actor: 'alice.test',
          repo: 'site',
          commit: tip,
          branch: 'main',
        },
      );
      return v.checks.some((c) => c.context === 'lint') ? v : undefined;
    });
    assert.deepEqual(listed, {
      commit: tip,
      checks: [
        {
          uri: listed.checks[0]!.uri,
          runner: { did: t.dids['bob.test'], handle: 'bob.test' },
          context: 'lint',
          state: 'success',
          trusted: true,
          targetUrl: 'https://ci.example/run/1',
          description: 'all clean',
        },
        ...listed.checks.slice(1),
      ],
      required: ['test'],
      // main's tip is the round merged without its checks: bob's failure on it still stands, and the
      // requirement is alice's (`by`: whose protection requires it).
      unmet: [
        {
          context: 'test',
          kind: 'failing',
          reason: 'test: failing (failure by bob.test)',
          by: [t.dids['alice.test']],
        },
      ],
    });
    assert.deepEqual(
      listed.checks.map((c) => c.context),
      ['lint', 'test'],
    );
    const ghost = await fetch(
      `${app.url}/xrpc/dev.knotless.listChecks?${new URLSearchParams({ actor: 'alice.test', repo: 'site', commit: 'e'.repeat(40) })}`,
    );
    assert.equal(ghost.status, 404);
    assert.equal(((await ghost.json()) as { error: string }).error, 'CommitNotFound');
    await page.goto(`${app.url}/alice.test/site/commit/${tip}`);
    const links = await page.locator('#checks a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
    assert.deepEqual(links, ['https://ci.example/run/1']);
    const text = await page.locator('#checks').innerText();
    assert.ok(!text.includes('ghost') && !text.includes('script') && !text.includes('\x1b'), text);
  });

  it('carol, trusted by no one, writes 60 checks on main: listChecks and the commit page show 50 of them and say 10 more', async () => {
    const tip = await mainOf(alice, 'alice.test/site');
    const repo = `at://${t.dids['alice.test']!}/dev.knotless.repo/site`;
    await writeManyRaw(
      t,
      'carol.test',
      'dev.knotless.check',
      Array.from({ length: 60 }, (_, i) => ({
        repo,
        commit: tip,
        context: `carol-${String(i).padStart(2, '0')}`,
        state: 'success',
        createdAt: new Date().toISOString(),
      })),
    );
    type Listed = { checks: { context: string; trusted: boolean }[]; moreUntrusted?: number };
    const listed = await waitFor("carol's 10 left out counted", async () => {
      const v = await xrpc<Listed>(app, 'dev.knotless.listChecks', {
        actor: 'alice.test',
        repo: 'site',
        commit: tip,
      });
      return v.moreUntrusted === 10 ? v : undefined;
    });
    // bob's two verdicts (trusted by main's protection) all, and carol's first 50 by context.
    assert.deepEqual(
      listed.checks.filter((c) => c.trusted).map((c) => c.context),
      ['lint', 'test'],
    );
    assert.deepEqual(
      listed.checks.filter((c) => !c.trusted).map((c) => c.context),
      Array.from({ length: 50 }, (_, i) => `carol-${String(i).padStart(2, '0')}`),
    );
    assert.equal('moreUntrustedAtLeast' in listed, false);
    await page.goto(`${app.url}/alice.test/site/commit/${tip}`);
    assert.equal(
      await page.locator('#checks .ck-more').innerText(),
      '… and 10 more by runners the owner does not trust',
    );
    await page.goto(`${app.url}/alice.test/site/branches`);
    const badges = await page.locator('.ck-badge').allInnerTexts();
    assert.ok(
      badges.some((b) => /checks\s+passed, 10 more untrusted/.test(b)),
      badges.join('\n'),
    );
  });
});
