// A team's branch protection on the web, as on the CLI (format.md, `dev.knotless.protection`): alice
// owns the site and bob (on the other PDS) maintains it; alice requires test, trusting carol, and bob
// requires lint, trusting dave, in his own account. The appview indexes both records and judges by
// knotless-core's one rule: the pull request page names bob as who required the failing check, the
// merge button refuses in the CLI's words until dave passes lint, and once alice removes bob his
// requirement stops counting on the page. A record of the same shape in carol's account (not a
// maintainer) counts for nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { openPr, writeRaw } from '../../knotless/test/helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { tableHands } from '../../knotless/test/helpers/ref-table.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { mainOf, signIn } from './web-forge-kit.ts';

// Two PDSes: alice and carol on the first, bob and dave on the second.
const t = useNetwork(['alice.test', 'bob.test', 'carol.test', 'dave.test'], { pdses: 2 });
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');
const carol = useGitUser(t, 'carol.test');
const dave = useGitUser(t, 'dave.test');

let app: Appview;
let pg: PgServer | undefined;
let browser: BrowserContext;
let page: Page;
let cspErrors: string[];
let work = '';

/** `who`'s check on `commit` of alice's site, written with the CLI into their own account. */
async function check(who: typeof bob, commit: string, context: string, state: string): Promise<void> {
  const res = await who.knotless(
    'check',
    'set',
    'alice.test/site',
    commit,
    '--context',
    context,
    '--state',
    state,
  );
  assert.equal(res.code, 0, res.stderr);
}

/** A branch of alice's site from main with one new file, pushed, and her pull request of it. */
async function pullOf(branch: string): Promise<{ head: string; path: string; id: string }> {
  await alice.ok(work, 'switch', '-q', '-c', branch, 'main');
  const head = await commitFiles(alice, work, { [`${branch}.txt`]: `${branch}\n` }, `add ${branch}`);
  await alice.ok(work, 'push', '-q', 'origin', branch);
  const pr = await openPr(alice, 'alice.test/site', `site:${branch}`, `Add ${branch}`);
  const rkey = pr.uri.split('/').at(-1)!;
  const where = `/alice.test/site/pulls/${t.dids['alice.test']!}/${rkey}`;
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

describe("a team's branch protection on the web", () => {
  before(async () => {
    await t.ready;
    if (process.env['KNOTLESS_TEST_INDEX'] === 'postgres') pg = await startPostgres();
    app = await appviewOn(t, pg === undefined ? ':memory:' : await pg.createDatabase('webprotectteam'));
    assert.equal((await alice.knotless('repo', 'create', 'site')).code, 0);
    work = await newRepo(alice, 'knotless://alice.test/site');
    await commitFiles(alice, work, { 'README.md': '# Site\n' }, 'start');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const add = await alice.knotless('repo', 'maintainer', 'add', 'site', 'bob.test');
    assert.equal(add.code, 0, add.stderr);
    const mine = await alice.knotless(
      'repo',
      'protect',
      'site',
      'main',
      '--require-check',
      'test',
      '--runner',
      'carol.test',
    );
    assert.equal(mine.code, 0, mine.stderr);
    const his = await bob.knotless(
      'repo',
      'protect',
      'alice.test/site',
      'main',
      '--require-check',
      'lint',
      '--runner',
      'dave.test',
    );
    assert.equal(his.code, 0, his.stderr);
    // carol (no maintainer) writes the same shape under the maintainer key: it counts for nothing.
    await writeRaw(
      t,
      'carol.test',
      'dev.knotless.protection',
      {
        repo: `at://${t.dids['alice.test']}/dev.knotless.repo/site`,
        branches: [{ branch: 'main', requiredChecks: ['carols'] }],
        createdAt: new Date().toISOString(),
      },
      `site~${t.dids['alice.test']}`,
    );
    browser = await launchBrowser();
    ({ page, cspErrors } = await watchedPage(browser));
    await signIn(page, app.url, 'alice.test', t.password);
  });
  after(async () => {
    await browser?.close();
    await app?.close();
    await pg?.stop();
  });

  it("bob's requirement refuses alice's merge button, naming him, until his runner passes it", async () => {
    const start = await mainOf(alice, 'alice.test/site');
    const pr = await pullOf('feature');
    // dave's test success counts for nothing of alice's: only bob trusts dave, and only for his lint.
    await check(dave, pr.head, 'test', 'success');
    await shows(
      pr.path,
      '.merge-checks',
      /^Not mergeable yet: the required checks have not passed: test: only checked by runners the owner does not trust \(dave\.test\); lint: no check by a trusted runner yet \(required by bob\.test\)\.$/,
    );
    await checkPage(page, cspErrors, "pull request waiting for a maintainer's checks");
    assert.ok(!(await page.locator('main').innerText()).includes('carols'), "carol's record counted");
    assert.equal(await post('Merge pull request'), 409);
    const refusal = await page.locator('main').innerText();
    assert.match(
      refusal,
      /waits for the required checks of main on [0-9a-f]{12}: test: only checked by runners the owner does not trust \(dave\.test\); lint: no check by a trusted runner yet \(required by bob\.test\); nothing was merged/,
    );
    // The CLI refuses the same merge in the same words.
    const cli = await alice.knotless('pr', 'merge', 'alice.test/site', pr.id);
    assert.equal(cli.code, 20, cli.stderr);
    assert.ok(cli.stderr.includes(/waits for .*; nothing was merged/.exec(refusal)![0]), cli.stderr);
    assert.equal(await mainOf(alice, 'alice.test/site'), start, 'main has not moved');

    await check(carol, pr.head, 'test', 'success');
    await check(dave, pr.head, 'lint', 'success');
    await shows(pr.path, '.merge-checks', /^Can be merged: the required checks of main have passed\.$/);
    assert.equal(await post('Merge pull request'), 303);
    await page.locator('.st-merged').first().waitFor();
    assert.equal(await mainOf(alice, 'alice.test/site'), pr.head);
  });

  it('bob, a maintainer, merges from the browser into his own account; only alice merges past checks', async () => {
    await alice.ok(work, 'switch', '-q', 'main');
    await alice.ok(work, 'pull', '-q', 'origin', 'main');
    const start = await mainOf(alice, 'alice.test/site');
    const pr = await pullOf('bobs');
    await check(carol, pr.head, 'test', 'success');
    await page.context().clearCookies();
    await signIn(page, app.url, 'bob.test', t.password);
    await shows(
      pr.path,
      '.merge-checks',
      /^Not mergeable yet: the required checks have not passed: lint: no check by a trusted runner yet \(required by bob\.test\)\.$/,
    );
    await checkPage(page, cspErrors, 'a pull request a maintainer may merge');
    assert.equal(await page.getByRole('button', { name: 'Merge pull request' }).count(), 1);
    assert.equal(await page.getByRole('button', { name: 'Merge without checks' }).count(), 0);
    // Posted anyway, the owner's button is refused in one sentence, and nothing moves.
    const csrf = await page.locator('form[action="/-/signout"] input[name="csrf"]').inputValue();
    const past = await page.request.post(`${app.url}${pr.path}/merge-without-checks`, {
      form: { csrf, head: pr.head },
      maxRedirects: 0,
    });
    assert.equal(past.status(), 403);
    assert.match(
      await past.text(),
      /Merging past required checks is alice\.test(&#39;|')s alone, whoever required them; nothing was merged/,
    );
    assert.equal(await mainOf(alice, 'alice.test/site'), start, 'main has not moved');
    await check(dave, pr.head, 'lint', 'success');
    await shows(pr.path, '.merge-checks', /^Can be merged: the required checks of main have passed\.$/);
    assert.equal(await post('Merge pull request'), 303);
    await page.locator('.st-merged').first().waitFor();
    assert.equal(await mainOf(alice, 'alice.test/site'), pr.head);
    // The merge is bob's push: his own table holds it, and no reader lists a divergence.
    const listed = await carol.ok(carol.dir(), 'ls-remote', 'knotless://alice.test/site');
    assert.ok(!listed.includes('refs/maintainers/'), listed);
    const his = await tableHands(t, 'bob.test').readTable(`site~${t.dids['alice.test']!}`);
    assert.equal(his?.value.refs.find((r) => r.ref === 'refs/heads/main')?.target, pr.head);

    // A file edited in the browser by bob is his push too (main is protected against force-push
    // and deletion only: a commit on it goes).
    await page.goto(`${app.url}/alice.test/site/blob/main/README.md`);
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByLabel('README.md').fill('# Site\n\nEdited by a maintainer.\n');
    await page.getByLabel('Commit message').fill('Bob edits the readme');
    await page.getByRole('button', { name: 'Commit to main' }).click();
    await page.waitForURL(/\/commits\/main$/);
    const edited = await mainOf(alice, 'alice.test/site');
    assert.notEqual(edited, pr.head);
    const after = await tableHands(t, 'bob.test').readTable(`site~${t.dids['alice.test']!}`);
    assert.equal(after?.value.refs.find((r) => r.ref === 'refs/heads/main')?.target, edited);
    const relisted = await carol.ok(carol.dir(), 'ls-remote', 'knotless://alice.test/site');
    assert.ok(!relisted.includes('refs/maintainers/'), relisted);
    await page.context().clearCookies();
    await signIn(page, app.url, 'alice.test', t.password);
  });

  it('once alice removes bob, his requirement counts for nothing on the page', async () => {
    await alice.ok(work, 'switch', '-q', 'main');
    await alice.ok(work, 'pull', '-q', 'origin', 'main');
    const pr = await pullOf('second');
    await check(carol, pr.head, 'test', 'success');
    await shows(
      pr.path,
      '.merge-checks',
      /^Not mergeable yet: the required checks have not passed: lint: no check by a trusted runner yet \(required by bob\.test\)\.$/,
    );
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'site', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    await shows(pr.path, '.merge-checks', /^Can be merged: the required checks of main have passed\.$/);
    await shows('/alice.test/site/branches', '.ck-badge', /checks passed/);
  });
});
