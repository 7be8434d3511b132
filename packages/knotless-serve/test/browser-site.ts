// The repository the browser page tests read ("alice.test/site": README with relative links and an
// image, a 1.5 KiB licence, two commits to a guide, a tag, a commit of 46 files, a topic branch,
// all pushed at once) and the browser that reads it; each visit checks CSP and axe (browser-kit.ts).
// The pages a reader coming from other forges expects, in headless Chromium: clone box first with
// a copy button, README links to the repository's files, last commit per entry, counts, the ref
// switcher, commit pages with diffstat and line numbers, paged diffs, branches and tags pages,
// history, blame, archives, grouped pushes, the Atom feed, dark mode and phone width. Every visit
// checks the page's CSP and runs axe-core (browser-kit.ts); screenshots go to a printed directory.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { commitFiles, newRepo, useGitUser, type GitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork, type TestNet } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { checkPage, launchBrowser, watchedPage } from './browser-kit.ts';
import { appviewOn, waitFor, xrpc } from './helpers.ts';

/** What the tests read: set up by {@link useSite}'s `setUp`. */
export interface Site {
  net: TestNet;
  alice: GitUser;
  shots: string;
  app: Appview;
  browser: BrowserContext;
  page: Page;
  cspErrors: string[];
  /** The commits: licence and docs, guide part two (tag v1), many files (main), topic. */
  c: string[];
  /** alice's work tree, on main after set-up. */
  work: string;
  setUp: () => Promise<void>;
  tearDown: () => Promise<void>;
  /** Opens a page, expects 200, checks CSP and axe, takes a screenshot. */
  visit: (url: string, shot: string) => Promise<void>;
}

export const base = '/alice.test/site';

/** The network, alice, and the site's state; call at the top of a test file. */
export function useSite(): Site {
  const t = useNetwork(['alice.test']);
  const site = {
    net: t,
    alice: useGitUser(t, 'alice.test'),
    shots: fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-serve-pages-')),
    c: [] as string[],
  } as Site;
  site.setUp = () => setUp(t, site);
  site.tearDown = () => tearDown(site);
  site.visit = (url, shot) => visit(site, url, shot);
  return site;
}

const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==',
  'base64',
);
const README = `# Site

See [the licence](COPYING), [the docs](docs/), [part two](./docs/guide.md#part-2),
[the root](/) and [the top](#site).

![logo](docs/logo.png)
`;

async function setUp(t: TestNet, s: Site): Promise<void> {
  const { alice, c } = s;
  s.app = await appviewOn(t, ':memory:');
  const created = await alice.knotless('repo', 'create', 'site', '--description', 'a site');
  assert.equal(created.code, 0, created.stderr);
  s.work = await newRepo(alice, 'knotless://alice.test/site');
  c.push(
    await commitFiles(
      alice,
      s.work,
      {
        'README.md': README,
        COPYING: 'x'.repeat(1536),
        'docs/guide.md': '# Guide\n\none\n',
        'docs/logo.png': PNG,
        'docs/README.md': 'Back to [the licence](../COPYING) or [the guide](guide.md).\n',
      },
      'add licence and docs',
    ),
  );
  c.push(
    await commitFiles(
      alice,
      s.work,
      { 'docs/guide.md': '# Guide\n\none\n\n## Part 2\n\ntwo\n' },
      'guide: part two',
    ),
  );
  await alice.ok(s.work, 'tag', 'v1');
  const many: Record<string, string> = {};
  for (let i = 0; i < 45; i++) many[`gen/f${String(i).padStart(2, '0')}.txt`] = `file ${i}\n`;
  // Sorted first in the diff, and over the 400 lines past which a file's diff is collapsed.
  many['gen/big.txt'] = Array.from({ length: 500 }, (_, i) => `line ${i}\n`).join('');
  c.push(await commitFiles(alice, s.work, many, 'many files'));
  await alice.ok(s.work, 'checkout', '-q', '-b', 'topic');
  c.push(await commitFiles(alice, s.work, { 'topic.txt': 'on topic\n' }, 'topic: one more'));
  await alice.ok(s.work, 'checkout', '-q', 'main');
  // One push of two branches and a tag: the home s.page shows it as one push.
  await alice.ok(s.work, 'push', '-q', 'origin', 'main', 'topic', 'v1');
  await waitFor('three refs mirrored', async () => {
    const r = await xrpc<{ refs: unknown[] }>(s.app, 'dev.knotless.getRepo', {
      actor: 'alice.test',
      repo: 'site',
    });
    return r.refs.length === 3 ? true : undefined;
  });
  await s.app.idle();
  s.browser = await launchBrowser();
  await s.browser.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: s.app.url });
  ({ page: s.page, cspErrors: s.cspErrors } = await watchedPage(s.browser));
}

async function tearDown(s: Site): Promise<void> {
  await s.browser?.close();
  await s.app?.close();
  console.log(`# screenshots in ${s.shots}`);
}

async function visit(s: Site, url: string, shot: string): Promise<void> {
  const res = await s.page.goto(`${s.app.url}${url}`);
  assert.equal(res?.status(), 200, url);
  await checkPage(s.page, s.cspErrors, url);
  await s.page.screenshot({ path: path.join(s.shots, `${shot}.png`), fullPage: true });
}
