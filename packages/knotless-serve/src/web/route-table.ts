// The appview's one route table: every address it answers is a Route, declared in the folder of its
// feature (pages/routes.ts, actions/routes.ts, xrpc/routes.ts, routes.ts for files, sign-in and git)
// and put together in server.ts. What a route needs (a signed-in reader, the session's CSRF token, a
// form body) is declared with it and enforced here, once, before its handler runs: a handler never
// checks sign-in or CSRF itself, and a new route cannot forget to.
import type http from 'node:http';
import { parseAtUri } from 'knotless-core/forge/records';
import { csrfMatches, type Viewer } from '../auth/web-sessions.ts';
import { logFields } from '../log.ts';
import { inactiveAccount } from './http-error.ts';
import { HttpError, type RepoTarget, type Site } from './site.ts';
import { viewer } from './viewer.ts';

/** What a handler is given: the request, its decoded path parameters and, for a form route, its form. */
export interface RouteContext {
  site: Site;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  url: URL;
  /** The path's `:name` segments, decoded. */
  params: Record<string, string>;
  /** The segments a trailing `*` matched, decoded and joined with `/` ('' when none). */
  tail: string;
  /** The posted form of a route that declares `form`; empty otherwise. */
  form: URLSearchParams;
  /** The signed-in reader: always set on a route that declares `signIn`. */
  viewer: Viewer | undefined;
  /** The repository a `/:owner/:repo/…` path names (404 when it is not known here). */
  repo: () => Promise<RepoTarget>;
}

/**
 * One address the appview answers. A handler returns a page's HTML (the server sends it with the
 * page headers), or undefined when it answered itself.
 */
export interface Route {
  /** GET also answers HEAD. ANY: the handler takes every method (git's smart HTTP, images). */
  method: 'GET' | 'POST' | 'ANY';
  /** Literal segments, `:name` for one segment, a final `*` for the rest (zero or more). */
  path: string;
  /** What it answers, for readers of the table: an HTML page, JSON, or a file or git's own format. */
  answers: 'html' | 'json' | 'file' | 'git';
  /** Needs a signed-in reader; the sentence a signed-out request gets, with 401. */
  signIn?: string;
  /**
   * A POST's form must carry the session's CSRF token (403 otherwise); or, for the few POSTs that
   * are not a signed-in reader's form, why not.
   */
  csrf?: true | { exempt: string };
  /** The body is a form (application/x-www-form-urlencoded) of at most this many bytes, read first. */
  form?: number;
  handle: (ctx: RouteContext) => Promise<string | undefined> | string | undefined;
}

/** The largest form taken but a file's edit (which declares its own): an issue's or a comment's text is far less. */
export const MAX_FORM_BYTES = 256 * 1024;

const SIGN_IN_TO_ACT = 'Sign in to do that.';
const NOT_OUR_FORM =
  'This form did not come from a page of this site, or has expired; reload the page and try again.';

/** The repository `/<actor>/<name>` names, with its mirror; 404 when the index does not know it. */
export async function findRepo(site: Site, actor: string, name: string): Promise<RepoTarget> {
  const repo = await repoTarget(site, actor, name);
  logFields({ repo: `${repo.did}/${name}` });
  return repo;
}

/**
 * {@link findRepo}'s rule without naming the repository in the request's log: for a page that
 * asks whether other pages would open (the notifications).
 */
export async function repoTarget(site: Site, actor: string, name: string): Promise<RepoTarget> {
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
  const maintainers = (await site.index.maintainers(owner.did, name)).map((m) => ({
    did: m.did,
    handle: m.handle,
  }));
  // Only a team's refs can diverge: a repository without maintainers is not read for it.
  const diverged = new Map<string, string[]>();
  if (maintainers.length > 0)
    for (const r of await site.index.refs(owner.did, name))
      if (r.diverged !== undefined)
        diverged.set(r.diverged.ref, [...(diverged.get(r.diverged.ref) ?? []), r.ref]);
  return {
    did: owner.did,
    owner: actor,
    name,
    description: repo.description,
    gitDir,
    forkOf,
    private: priv,
    maintainers,
    diverged: [...diverged].map(([ref, apart]) => ({ ref, apart })),
  };
}

async function readForm(req: http.IncomingMessage, max: number): Promise<URLSearchParams> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded')
    throw new HttpError(415, 'Actions are posted as forms from the pages here.');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > max) throw new HttpError(413, 'That form is too large.');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

/** The path parameters and tail when `segs` fits `pattern`, else undefined. */
export function matchPath(
  pattern: string,
  segs: readonly string[],
): { params: Record<string, string>; tail: string } | undefined {
  const parts = pattern.split('/').filter(Boolean);
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (part === '*' && i === parts.length - 1) return { params, tail: segs.slice(i).join('/') };
    const seg = segs[i];
    if (seg === undefined) return undefined;
    if (part.startsWith(':')) params[part.slice(1)] = seg;
    else if (part !== seg) return undefined;
  }
  return segs.length === parts.length ? { params, tail: '' } : undefined;
}

function methodFits(route: Route, method: string): boolean {
  return route.method === 'ANY' || route.method === method || (route.method === 'GET' && method === 'HEAD');
}

/** A POST no route takes: refused as any action would be (signed out, a foreign form), else 404. */
const UNKNOWN_ACTION: Route = {
  method: 'POST',
  path: '*',
  answers: 'html',
  signIn: SIGN_IN_TO_ACT,
  csrf: true,
  form: MAX_FORM_BYTES,
  handle: () => {
    throw new HttpError(404, 'No such action.');
  },
};

/**
 * Answers a request from `routes`: the first route whose path and method fit, after what it
 * declares (sign-in, then its form, then the form's CSRF token) holds.
 */
export async function dispatch(
  routes: readonly Route[],
  site: Site,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<string | undefined> {
  const url = new URL(req.url ?? '/', 'http://appview');
  const method = req.method ?? 'GET';
  let segs: string[];
  try {
    segs = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
  } catch (err) {
    // decodeURIComponent's only failure: a malformed %-escape in the path the client sent.
    if (err instanceof URIError) throw new HttpError(400, 'The address is not valid.');
    throw err;
  }
  let route: Route | undefined;
  let found: { params: Record<string, string>; tail: string } | undefined;
  for (const r of routes) {
    const m = matchPath(r.path, segs);
    if (m === undefined) continue;
    if (!methodFits(r, method)) continue;
    route = r;
    found = m;
    break;
  }
  if (route === undefined || found === undefined) {
    if (method === 'POST') {
      route = UNKNOWN_ACTION;
      found = { params: {}, tail: '' };
    } else if (method === 'GET' || method === 'HEAD') throw new HttpError(404, 'No such page.');
    else throw new HttpError(405, 'Pages are read with GET.');
  }
  const reader = viewer();
  // Sign-in first: a signed-out reader's body (an edit's may be large) is never read.
  if (route.signIn !== undefined && reader === undefined) throw new HttpError(401, route.signIn);
  const form = route.form === undefined ? new URLSearchParams() : await readForm(req, route.form);
  if (route.csrf === true && (reader === undefined || !csrfMatches(reader, form.get('csrf') ?? undefined)))
    throw new HttpError(403, NOT_OUR_FORM);
  const { params, tail } = found;
  return await route.handle({
    site,
    req,
    res,
    url,
    params,
    tail,
    form,
    viewer: reader,
    repo: () => findRepo(site, params['owner'] ?? '', (params['repo'] ?? '').replace(/\.git$/, '')),
  });
}

/** The signed-in reader of a route that declares `signIn` (the dispatcher has checked it). */
export function signedIn(ctx: RouteContext): Viewer {
  if (ctx.viewer === undefined) throw new HttpError(401, SIGN_IN_TO_ACT);
  return ctx.viewer;
}

export { SIGN_IN_TO_ACT };
