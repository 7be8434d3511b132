import fs from 'node:fs';
import type http from 'node:http';
import { parseAtUri } from 'knotless-core/forge/records';
import { handleXrpc } from './xrpc/router.ts';
import { RequestTimeout, requestSignal, withSignal } from '../net/deadline.ts';
import { editPage } from './actions/edit.ts';
import { handlePost } from './actions/router.ts';
import { finishSignIn, signInPage } from './actions/sign-in.ts';
import { serveGit } from './git-http.ts';
import { readyToClone } from '../mirror/ready.ts';
import { html, page, type SafeHtml } from './html.ts';
import { accountPage } from './pages/account.ts';
import { archive, atomFeed } from './pages/archive.ts';
import { blobPage, rawBlob } from './pages/blob.ts';
import { commitPage, comparePage } from './pages/commit.ts';
import { commitsPage } from './pages/commits.ts';
import { blamePage, historyPage } from './pages/history.ts';
import { homePage } from './pages/home.ts';
import { notificationsFeed, notificationsPage } from './pages/notifications.ts';
import { issuePage, issuesPage } from './pages/issues.ts';
import { pullPage } from './pages/pull.ts';
import { pullsPage } from './pages/pulls.ts';
import { branchesPage, tagsPage } from './pages/refs.ts';
import { repoPage, treePage } from './pages/repo.ts';
import { inactiveAccount } from './http-error.ts';
import { HttpError, Redirect, type RepoTarget, type Site } from './site.ts';
import { SCRIPT } from './script.ts';
import { STYLE } from './style.ts';
import { viewer, withViewer } from './viewer.ts';
import { logFields, withRequestLog } from '../log.ts';

/** A repository addressed by a URL: its owner, name and mirror. */
const GIT_SERVICES = new Set(['info/refs', 'git-upload-pack', 'git-receive-pack']);

/** HTML response headers: no scripts, no framing, no sniffing, whatever a page contains. */
const HTML_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    // Scripts and styles only from files here, never inline: a page cannot carry a script even if
    // escaping failed somewhere. Images only from here: README images from other hosts come through /-/img/ (src/web/images.ts),
    // so a reader's browser never contacts a host a README names.
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

async function findRepo(site: Site, actor: string, name: string): Promise<RepoTarget> {
  const owner = await site.index.owner(actor);
  if (owner?.status != null) throw inactiveAccount(actor, owner.status);
  const repo = owner === undefined ? undefined : await site.index.repo(owner.did, name);
  if (owner === undefined || repo === undefined)
    throw new HttpError(404, `No repository ${actor}/${name} is known here.`);
  const gitDir = site.mirror.gitDir(owner.did, name);
  const parent = repo.fork_of === null ? undefined : parseAtUri(repo.fork_of);
  const forkOf =
    parent === undefined
      ? null
      : { owner: (await site.index.owner(parent.did))?.handle ?? parent.did, name: parent.rkey };
  const priv = repo.private === 1;
  logFields({ repo: `${owner.did}/${name}` });
  return { did: owner.did, owner: actor, name, description: repo.description, gitDir, forkOf, private: priv };
}

async function route(
  site: Site,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<string | undefined> {
  const url = new URL(req.url ?? '/', 'http://appview');
  if (url.pathname.startsWith('/xrpc/')) {
    await handleXrpc(site, url.pathname.slice(6), req, res, url.searchParams);
    return undefined;
  }
  if (url.pathname === '/static/style.css') {
    res
      .writeHead(200, { 'content-type': 'text/css; charset=utf-8', 'cache-control': 'max-age=300' })
      .end(STYLE);
    return undefined;
  }
  if (url.pathname === '/static/app.js') {
    res
      .writeHead(200, {
        'content-type': 'text/javascript; charset=utf-8',
        'cache-control': 'max-age=300',
        'x-content-type-options': 'nosniff',
      })
      .end(SCRIPT);
    return undefined;
  }
  if (url.pathname === '/oauth-client-metadata.json' || url.pathname === '/oauth/jwks.json') {
    const signIn = site.signIn;
    const meta = url.pathname === '/oauth-client-metadata.json';
    if (signIn === undefined || (!meta && !signIn.confidential)) throw new HttpError(404, 'Not found.');
    res
      .writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' })
      .end(JSON.stringify(meta ? signIn.client.clientMetadata : signIn.jwks));
    return undefined;
  }
  if (url.pathname === '/oauth/callback') {
    await finishSignIn(site, url.searchParams, res);
    return undefined;
  }
  if (url.pathname.startsWith('/-/img/')) {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'Images are read with GET.');
    await site.images.serve(url.pathname.slice('/-/img/'.length), res, requestSignal());
    return undefined;
  }
  if (url.pathname === '/robots.txt' || url.pathname === '/favicon.ico')
    throw new HttpError(404, 'Not found.');
  let segs: string[];
  try {
    segs = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch (err) {
    // decodeURIComponent's only failure: a malformed %-escape in the path the client sent.
    if (err instanceof URIError) throw new HttpError(400, 'The address is not valid.');
    throw err;
  }
  if (req.method === 'POST' && segs[0] !== undefined && !GIT_SERVICES.has(segs.slice(2).join('/'))) {
    return handlePost(site, req, res, segs, (actor, name) => findRepo(site, actor, name));
  }
  if (url.pathname === '/-/notifications') return notificationsPage(site);
  if (url.pathname === '/-/notifications.atom') {
    await notificationsFeed(site, url.searchParams.get('token') ?? '', res);
    return undefined;
  }
  if (segs.length === 2 && segs[0] === '-' && segs[1] === 'signin') {
    // The one form whose answer leaves this site: the redirect to the reader's PDS (any https
    // server; on the dev network, plain http on this machine). Every other page keeps 'self'.
    const pds = site.dev ? "'self' https: http:" : "'self' https:";
    const csp = HTML_HEADERS['content-security-policy'].replace("form-action 'self'", `form-action ${pds}`);
    const body = signInPage(site);
    res
      .writeHead(200, { ...HTML_HEADERS, 'content-security-policy': csp, 'cache-control': 'no-store' })
      .end(req.method === 'HEAD' ? undefined : body);
    return undefined;
  }
  if (segs.length === 0) return homePage(site, url.searchParams.get('q') ?? '');
  const [actor, rawName, view, ...rest] = segs as [
    string,
    string | undefined,
    string | undefined,
    ...string[],
  ];
  if (rawName === undefined) return accountPage(site, actor);
  const name = rawName.replace(/\.git$/, '');
  const gitPath = [view, ...rest].join('/');
  if (GIT_SERVICES.has(gitPath)) {
    const repo = await findRepo(site, actor, name);
    // The first request of a clone or fetch: answered only once the mirror holds what is indexed.
    if (gitPath === 'info/refs' && !/service=git-receive-pack/.test(url.search)) {
      const refused = await readyToClone(
        site.index,
        site.mirror,
        repo.did,
        repo.name,
        site.gitTimeoutMs / 2,
        (line) => site.log(line),
      );
      if (refused !== undefined) {
        res
          .writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '5' })
          .end(`${refused}\n`);
        return undefined;
      }
    }
    if (!fs.existsSync(repo.gitDir)) throw new HttpError(404, 'This repository is not mirrored yet.');
    serveGit(repo.gitDir, gitPath, req, res, url.search.slice(1), requestSignal());
    return undefined;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'Pages are read with GET.');
  const repo = await findRepo(site, actor, name);
  const tail = rest.join('/');
  switch (view) {
    case undefined:
      return repoPage(site, repo);
    case 'tree':
      return treePage(site, repo, tail);
    case 'blob':
      return blobPage(site, repo, tail);
    case 'raw':
      await rawBlob(repo, tail, res);
      return undefined;
    case 'commits':
      return commitsPage(site, repo, tail, pageParam(url));
    case 'commit':
      return commitPage(site, repo, tail, pageParam(url));
    case 'compare':
      return comparePage(site, repo, tail, pageParam(url));
    case 'branches':
      return branchesPage(site, repo, pageParam(url));
    case 'tags':
      return tagsPage(site, repo, pageParam(url));
    case 'history':
      return historyPage(site, repo, tail, pageParam(url));
    case 'blame':
      return blamePage(site, repo, tail);
    case 'edit':
      return editPage(site, repo, tail);
    case 'archive':
      await archive(repo, tail, res);
      return undefined;
    case 'atom':
      await atomFeed(site, repo, tail, res);
      return undefined;
    case 'pulls':
      if (rest.length === 0) return pullsPage(site, repo, url.searchParams.get('state'), pageParam(url));
      if (rest.length === 2)
        return pullPage(site, repo, rest[0]!, rest[1]!, url.searchParams, pageParam(url));
      throw new HttpError(404, 'No such page.');
    case 'issues':
      if (rest.length === 0) return issuesPage(site, repo, url.searchParams.get('state'), pageParam(url));
      if (rest.length === 2) return issuePage(site, repo, rest[0]!, rest[1]!);
      throw new HttpError(404, 'No such page.');
    default:
      throw new HttpError(404, 'No such page.');
  }
}

/** The `?page=` of a paged view, 1 when absent or nonsense. */
function pageParam(url: URL): number {
  const n = Number(url.searchParams.get('page') ?? '1');
  return Number.isInteger(n) && n > 0 && n < 1e6 ? n : 1;
}

/** Smart-HTTP git requests get the longer limit: a clone of a big repository is one long answer. */
function isGitRequest(pathname: string): boolean {
  return /\/(info\/refs|git-upload-pack|git-receive-pack)$/.test(pathname);
}

/**
 * Answers one HTTP request: a page, the stylesheet, an image, an XRPC query or git's smart HTTP.
 * Every request has a time limit: past it the reader gets a 503 (or, if the answer has begun, a cut
 * connection) and the request's signal aborts, which kills the git processes working for it. A
 * reader who goes away aborts it the same way.
 */
export function handleRequest(site: Site, req: http.IncomingMessage, res: http.ServerResponse): void {
  // Every line logged for the request, its time limit's included, carries its fields.
  withRequestLog(req.method, (req.url ?? '/').split('?')[0] ?? '/', () => answer(site, req, res));
}

function answer(site: Site, req: http.IncomingMessage, res: http.ServerResponse): void {
  const pathname = (req.url ?? '/').split('?')[0] ?? '/';
  const limit = isGitRequest(pathname) ? site.gitTimeoutMs : site.requestTimeoutMs;
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort(new RequestTimeout(`took longer than ${limit} ms`));
    timedOut(site, req, res, limit);
  }, limit);
  res.on('close', () => {
    clearTimeout(timer);
    controller.abort(new RequestTimeout('the reader went away'));
  });
  withSignal(controller.signal, async () => {
    // The signed-in reader (when the request carries a live session's cookie), for the layout and forms.
    const reader = await site.sessions.viewer(req);
    if (reader !== undefined) logFields({ account: reader.did });
    // The header's count, for pages only (not files, queries or git).
    const unseen =
      reader === undefined || /^\/(static|xrpc|-\/img)\//.test(pathname) || isGitRequest(pathname)
        ? 0
        : await site.notifications.unseen(reader.did, reader.handle);
    return withViewer(reader, site.signIn !== undefined, unseen, async () => ({
      body: await route(site, req, res),
      signedIn: viewer() !== undefined,
    }));
  }).then(
    ({ body, signedIn }) => {
      if (res.headersSent || res.writableEnded) return;
      // A page made for a signed-in reader (their name, their CSRF token) is never kept by a cache.
      const headers = signedIn ? { ...HTML_HEADERS, 'cache-control': 'private, no-store' } : HTML_HEADERS;
      if (body !== undefined) res.writeHead(200, headers).end(req.method === 'HEAD' ? undefined : body);
    },
    (err: unknown) => {
      // Work stopped by the time limit was already answered (or the reader left): nothing to say.
      if (controller.signal.aborted) return void (res.headersSent ? res.destroy() : undefined);
      if (err instanceof Redirect && !res.headersSent)
        return void res.writeHead(302, { location: err.location }).end();
      const status = err instanceof HttpError ? err.status : 500;
      if (!(err instanceof HttpError)) site.log.error(`${req.method} ${req.url}: ${String(err)}`);
      const message = err instanceof HttpError ? err.message : 'Something went wrong; the log says what.';
      if (res.headersSent) return void res.destroy();
      const kept = err instanceof HttpError ? err.body : undefined;
      if (kept !== undefined)
        // A form shown again carries the reader's CSRF token: never kept by a cache.
        return void res
          .writeHead(status, { ...HTML_HEADERS, 'cache-control': 'private, no-store' })
          .end(page(String(status), kept));
      res.writeHead(status, HTML_HEADERS).end(page(String(status), htmlMessage(status, message)));
    },
  );
}

/** The answer to a request out of time, in the form its caller reads (JSON for XRPC, text for git). */
function timedOut(site: Site, req: http.IncomingMessage, res: http.ServerResponse, limit: number): void {
  site.log.warn(`${req.method} ${req.url}: stopped after ${limit} ms`);
  if (res.headersSent) return void res.destroy();
  const seconds = Math.round(limit / 100) / 10;
  const message = `This request took longer than ${seconds} s and was stopped; try again later.`;
  const pathname = (req.url ?? '/').split('?')[0] ?? '/';
  res.setHeader('connection', 'close');
  if (pathname.startsWith('/xrpc/'))
    res
      .writeHead(503, {
        'content-type': 'application/json; charset=utf-8',
        'access-control-allow-origin': '*',
      })
      .end(JSON.stringify({ error: 'RequestTimeout', message }));
  else if (isGitRequest(pathname))
    res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end(message + '\n');
  else res.writeHead(503, HTML_HEADERS).end(page('503', htmlMessage(503, message)));
}

function htmlMessage(status: number, message: string): SafeHtml {
  return html`<h1>${status}</h1>
    <p>${message}</p>`;
}
