import type http from 'node:http';
import { RequestTimeout, withSignal } from '../net/deadline.ts';
import { actionRoutes } from './actions/routes.ts';
import { HTML_HEADERS, html, page, type SafeHtml } from './html.ts';
import { opensFor } from './pages/notifications.ts';
import { pageRoutes } from './pages/routes.ts';
import { dispatch, type Route } from './route-table.ts';
import { serverRoutes } from './routes.ts';
import { HttpError, Redirect, type Site } from './site.ts';
import { viewer, withViewer } from './viewer.ts';
import { xrpcRoutes } from './xrpc/routes.ts';
import { logFields, withRequestLog } from '../log.ts';

/**
 * Every address the appview answers, first fit wins: its own files, sign-in and git before the
 * queries, the forms' posts and the pages, whose `/:owner/:repo/…` patterns take what is left.
 */
export const ROUTES: readonly Route[] = [...serverRoutes, ...xrpcRoutes, ...actionRoutes, ...pageRoutes];

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
        : await site.notifications.unseen(reader.did, reader.handle, opensFor(site));
    return withViewer(reader, site.signIn !== undefined, unseen, async () => ({
      body: await dispatch(ROUTES, site, req, res),
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
