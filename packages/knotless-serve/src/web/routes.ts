// The appview's own files, sign-in's addresses, images and git's smart HTTP, as routes of its table.
import fs from 'node:fs';
import type http from 'node:http';
import { safeText } from 'knotless-core/text/terminal';
import { requestSignal } from '../net/deadline.ts';
import { readyToClone } from '../mirror/ready.ts';
import { finishSignIn, signInPage } from './actions/sign-in.ts';
import { repoForGit, serveGit } from './git-http.ts';
import { HTML_HEADERS } from './html.ts';
import type { Route } from './route-table.ts';
import { SCRIPT } from './script.ts';
import { HttpError, type Site } from './site.ts';
import { STYLE } from './style.ts';

/** git's smart HTTP: answered for every method, as git asks (GET info/refs, POST the packs). */
function gitService(service: string): Route {
  return {
    method: 'ANY',
    path: `/:owner/:repo/${service}`,
    answers: 'git',
    // git sends no cookie and no form; the appview's clone is read-only (git-http.ts refuses a push).
    csrf: { exempt: "git's own protocol, not a form" },
    async handle({ site, req, res, url, params }) {
      try {
        await answerGit(site, service, req, res, url, params);
      } catch (err) {
        // git shows the text of an error answer to its user ("remote: ..."), not a page's HTML.
        if (!(err instanceof HttpError) || res.headersSent) throw err;
        const headers = { 'content-type': 'text/plain; charset=utf-8' };
        res
          .writeHead(err.status, err.status === 503 ? { ...headers, 'retry-after': '5' } : headers)
          .end(`${safeText(err.message, 400)}\n`);
      }
      return undefined;
    },
  };
}

async function answerGit(
  site: Site,
  service: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  url: URL,
  params: Record<string, string>,
): Promise<void> {
  const repo = await repoForGit(site, params['owner'] ?? '', (params['repo'] ?? '').replace(/\.git$/, ''));
  // The first request of a clone or fetch: answered only once the mirror holds what is indexed.
  if (service === 'info/refs' && !/service=git-receive-pack/.test(url.search)) {
    const refused = await readyToClone(
      site.index,
      site.mirror,
      repo.did,
      repo.name,
      site.gitTimeoutMs / 2,
      (line) => site.log(line),
    );
    if (refused !== undefined) throw new HttpError(503, refused);
  }
  if (!fs.existsSync(repo.gitDir)) throw new HttpError(404, 'This repository is not mirrored yet.');
  serveGit(repo.gitDir, service, req, res, url.search.slice(1), requestSignal());
}

function file(path: string, type: string, body: string, headers: Record<string, string> = {}): Route {
  return {
    method: 'GET',
    path,
    answers: 'file',
    handle: ({ res }) =>
      void res.writeHead(200, { 'content-type': type, 'cache-control': 'max-age=300', ...headers }).end(body),
  };
}

function notFound(path: string): Route {
  return {
    method: 'GET',
    path,
    answers: 'file',
    handle: () => {
      throw new HttpError(404, 'Not found.');
    },
  };
}

export const serverRoutes: Route[] = [
  file('/static/style.css', 'text/css; charset=utf-8', STYLE),
  file('/static/app.js', 'text/javascript; charset=utf-8', SCRIPT, { 'x-content-type-options': 'nosniff' }),
  ...['/oauth-client-metadata.json', '/oauth/jwks.json'].map((path): Route => ({
    method: 'GET',
    path,
    answers: 'json',
    handle({ site, res }) {
      const signIn = site.signIn;
      const meta = path === '/oauth-client-metadata.json';
      if (signIn === undefined || (!meta && !signIn.confidential)) throw new HttpError(404, 'Not found.');
      res
        .writeHead(200, { 'content-type': 'application/json', 'cache-control': 'max-age=300' })
        .end(JSON.stringify(meta ? signIn.client.clientMetadata : signIn.jwks));
      return undefined;
    },
  })),
  {
    method: 'GET',
    path: '/oauth/callback',
    answers: 'html',
    handle: async ({ site, req, url, res }) => void (await finishSignIn(site, req, url.searchParams, res)),
  },
  {
    method: 'GET',
    path: '/-/signin',
    answers: 'html',
    handle({ site, req, res }) {
      // The one form whose answer leaves this site: the redirect to the reader's PDS (any https
      // server; on the dev network, plain http on this machine). Every other page keeps 'self'.
      const pds = site.dev ? "'self' https: http:" : "'self' https:";
      const csp = HTML_HEADERS['content-security-policy'].replace("form-action 'self'", `form-action ${pds}`);
      const body = signInPage(site);
      res
        .writeHead(200, { ...HTML_HEADERS, 'content-security-policy': csp, 'cache-control': 'no-store' })
        .end(req.method === 'HEAD' ? undefined : body);
      return undefined;
    },
  },
  {
    method: 'ANY',
    path: '/-/img/*',
    answers: 'file',
    csrf: { exempt: 'it only reads (any other method than GET is refused, 405)' },
    async handle({ site, req, res, url }) {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        throw new HttpError(405, 'Images are read with GET.');
      // The raw path: the image's key is as the page wrote it.
      await site.images.serve(url.pathname.slice('/-/img/'.length), res, requestSignal());
      return undefined;
    },
  },
  notFound('/robots.txt'),
  notFound('/favicon.ico'),
  ...['info/refs', 'git-upload-pack', 'git-receive-pack'].map(gitService),
];
