// The pages, as routes of the appview's table: every one is read with GET (and HEAD); a page a
// signed-out reader cannot see declares it, and the dispatcher answers 401 before it runs.
import { editPage } from '../actions/edit.ts';
import type { Route, RouteContext } from '../route-table.ts';
import type { RepoTarget, Site } from '../site.ts';
import { accountPage } from './account.ts';
import { archive, atomFeed } from './archive.ts';
import { blobPage, rawBlob } from './blob.ts';
import { commitPage, comparePage } from './commit.ts';
import { commitsPage } from './commits.ts';
import { blamePage, historyPage } from './history.ts';
import { forgeRepo } from './forge-common.ts';
import { homePage } from './home.ts';
import { issuePage, issuesPage } from './issues.ts';
import { notificationsFeed, notificationsPage } from './notifications.ts';
import { pullPage } from './pull.ts';
import { pullsPage } from './pulls.ts';
import { branchesPage, tagsPage } from './refs.ts';
import { repoPage, treePage } from './repo.ts';

/** The `?page=` of a paged view, 1 when absent or nonsense. */
function pageParam(url: URL): number {
  const n = Number(url.searchParams.get('page') ?? '1');
  return Number.isInteger(n) && n > 0 && n < 1e6 ? n : 1;
}

function get(path: string, handle: Route['handle'], signIn?: string): Route {
  return { method: 'GET', path, answers: 'html', ...(signIn === undefined ? {} : { signIn }), handle };
}

/** A view of one repository, `/<owner>/<repo>/<path>`. */
function repoView(
  path: string,
  view: (site: Site, repo: RepoTarget, ctx: RouteContext) => Promise<string | undefined>,
  signIn?: string,
): Route {
  return get(`/:owner/:repo${path}`, async (ctx) => view(ctx.site, await ctx.repo(), ctx), signIn);
}

/** A view of a repository's pull requests or issues: a private repository keeps none. */
function forgeView(
  path: string,
  view: (site: Site, repo: RepoTarget, ctx: RouteContext) => Promise<string | undefined>,
): Route {
  return repoView(path, (site, repo, ctx) => view(site, forgeRepo(repo), ctx));
}

export const pageRoutes: Route[] = [
  get('/', ({ site, url }) => homePage(site, url.searchParams.get('q') ?? '')),
  get('/-/notifications', ({ site }) => notificationsPage(site), 'Sign in to see your notifications.'),
  get('/-/notifications.atom', async ({ site, url, res }) => {
    // Signed in or not: the feed's reader is whoever holds the token.
    await notificationsFeed(site, url.searchParams.get('token') ?? '', res);
    return undefined;
  }),
  get('/:actor', ({ site, params }) => accountPage(site, params['actor']!)),
  repoView('', (site, repo) => repoPage(site, repo)),
  repoView('/tree/*', (site, repo, { tail }) => treePage(site, repo, tail)),
  repoView('/blob/*', (site, repo, { tail }) => blobPage(site, repo, tail)),
  repoView('/raw/*', async (site, repo, { tail, res }) => void (await rawBlob(site, repo, tail, res))),
  repoView('/commits/*', (site, repo, { tail, url }) => commitsPage(site, repo, tail, pageParam(url))),
  repoView('/commit/*', (site, repo, { tail, url }) => commitPage(site, repo, tail, pageParam(url))),
  repoView('/compare/*', (site, repo, { tail, url }) => comparePage(site, repo, tail, pageParam(url))),
  repoView('/branches/*', (site, repo, { url }) => branchesPage(site, repo, pageParam(url))),
  repoView('/tags/*', (site, repo, { url }) => tagsPage(site, repo, pageParam(url))),
  repoView('/history/*', (site, repo, { tail, url }) => historyPage(site, repo, tail, pageParam(url))),
  repoView('/blame/*', (site, repo, { tail }) => blamePage(site, repo, tail)),
  repoView('/edit/*', (site, repo, { tail }) => editPage(site, repo, tail), 'Sign in to edit files.'),
  repoView('/archive/*', async (_site, repo, { tail, res }) => void (await archive(repo, tail, res))),
  repoView('/atom/*', async (site, repo, { tail, res }) => void (await atomFeed(site, repo, tail, res))),
  forgeView('/pulls', (site, repo, { url }) =>
    pullsPage(site, repo, url.searchParams.get('state'), pageParam(url)),
  ),
  forgeView('/pulls/:author/:rkey', (site, repo, { params, url }) =>
    pullPage(site, repo, params['author']!, params['rkey']!, url.searchParams, pageParam(url)),
  ),
  forgeView('/issues', (site, repo, { url }) =>
    issuesPage(site, repo, url.searchParams.get('state'), pageParam(url)),
  ),
  forgeView('/issues/:author/:rkey', (site, repo, { params }) =>
    issuePage(site, repo, params['author']!, params['rkey']!),
  ),
];
