import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AuthServices } from './services.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import { accountLine } from './login.ts';
import { DEFAULT_SCOPE, loadOAuth, memoryStore, oauthClientFor, type LoginStates } from './oauth-client.ts';
import { PasswordSession } from './password-session.ts';
import type { OAuthStoredSession } from './store.ts';

/** How long `knotless login` waits for the browser to come back. */
const WAIT_MS = 10 * 60_000;

/** Options for {@link oauthLogin}. */
export interface OAuthLoginOptions {
  scope?: string;
  /** Opens the address in a browser; false to only print it. */
  browser: boolean;
  /** Where lines for the user go (standard error). */
  notice: (line: string) => void;
}

/** One request to the loopback redirect: its query, and a way to answer the browser. */
interface Callback {
  params: URLSearchParams;
  answer(ok: boolean, text: string): void;
}

/**
 * Listens on 127.0.0.1 (RFC 8252 loopback redirect) for the authorization server's redirect. Only a
 * request carrying the state of the authorization this login started is taken: any other local
 * process, or a web page guessing the port, gets a 400 and cannot end or hijack the sign-in.
 */
async function listenForCallback(
  expected: (state: string) => boolean,
): Promise<{ port: number; next: Promise<Callback>; close(): void }> {
  let deliver!: (cb: Callback) => void;
  const next = new Promise<Callback>((resolve) => (deliver = resolve));
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (url.pathname !== '/callback') {
      res.writeHead(404).end();
      return;
    }
    if (!expected(url.searchParams.get('state') ?? '')) {
      res
        .writeHead(400, { 'content-type': 'text/plain; charset=utf-8' })
        .end('This is not the answer to a sign-in knotless started.\n');
      return;
    }
    deliver({
      params: url.searchParams,
      answer(ok, text) {
        const page = `<!doctype html><meta charset="utf-8"><title>knotless</title><p>${text}</p>`;
        res.writeHead(ok ? 200 : 400, { 'content-type': 'text/html; charset=utf-8' }).end(page);
      },
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    port: (server.address() as AddressInfo).port,
    next,
    close: () => server.close(),
  };
}

/** Asks the desktop to open a URL; the address is printed anyway, so a failure here is harmless. */
function openBrowser(url: string): void {
  const [cmd, args] =
    process.platform === 'darwin'
      ? ['open', [url]]
      : process.platform === 'win32'
        ? ['cmd', ['/c', 'start', '""', url]]
        : ['xdg-open', [url]];
  const child = spawn(cmd, args, { stdio: 'ignore', detached: true });
  child.on('error', () => {
    // No desktop opener here (a server, a container): the printed address is the way.
  });
  child.unref();
}

/**
 * Logs in with OAuth as a loopback client: PAR, PKCE and DPoP by the official client; the user signs
 * in and approves at their own PDS, which redirects to a one-shot server on 127.0.0.1. Stores the
 * session (0600, with its DPoP key) and makes it current.
 */
export async function oauthLogin(
  ctx: AuthServices,
  identifier: string,
  opts: OAuthLoginOptions,
): Promise<OAuthStoredSession> {
  const identity = await ctx.resolver.resolve(identifier, { fresh: true });
  const pds = ctx.resolver.serviceFor(identity);
  opts.notice(`Signing in as ${accountLine(identity)} at ${safeText(pds)}`);
  const previous = ctx.sessions.get(identity.did);
  const states: LoginStates = memoryStore();
  const callback = await listenForCallback((state) => states.has(state));
  try {
    const redirect = `http://127.0.0.1:${callback.port}/callback` as const;
    const scope = opts.scope ?? DEFAULT_SCOPE;
    const oauth = await loadOAuth();
    let clientId: string;
    try {
      clientId = oauth.buildAtprotoLoopbackClientId({ scope, redirect_uris: [redirect] });
    } catch (err) {
      throw new KnotlessError(
        'usage',
        `The scope "${safeText(scope)}" is not valid: ${safeText(String(err), 200)}`,
      );
    }
    const meta: Omit<OAuthStoredSession, 'oauth'> = {
      kind: 'oauth',
      did: identity.did,
      handle: identity.handle ?? identity.did,
      pds,
      clientId,
      createdAt: new Date().toISOString(),
    };
    const { client } = await oauthClientFor(ctx, ctx.sessions, meta, states);
    let url: URL;
    try {
      url = await client.authorize(identity.did, { scope, redirect_uri: redirect });
    } catch (err) {
      throw new KnotlessError(
        'pds-error',
        `${safeText(pds)} did not start an OAuth sign-in (${safeText(String(err), 200)}); try again, or log in with --app-password.`,
        { cause: err },
      );
    }
    opts.notice('Open this address to sign in and approve access:');
    opts.notice(`  ${safeText(url.href, 4000)}`);
    if (opts.browser) openBrowser(url.href);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new KnotlessError(
              'login-failed',
              `No answer from the browser within ${WAIT_MS / 60_000} minutes; run \`knotless login\` again.`,
            ),
          ),
        WAIT_MS,
      );
    });
    const cb = await Promise.race([callback.next, timeout]).finally(() => clearTimeout(timer));
    let did: string;
    try {
      const { session } = await client.callback(cb.params, { redirect_uri: redirect });
      did = session.did;
    } catch (err) {
      const denied = cb.params.get('error');
      cb.answer(false, 'Sign-in failed; see the terminal.');
      throw new KnotlessError(
        'login-failed',
        denied !== null
          ? `The sign-in was not approved at ${safeText(pds)} (${safeText(denied, 100)}); nothing was stored.`
          : `The sign-in could not be completed (${safeText(String(err), 200)}); nothing was stored, try again.`,
        { cause: err },
      );
    }
    cb.answer(true, 'Signed in to knotless. You can close this window.');
    if (did !== identity.did) {
      ctx.sessions.remove(did);
      throw new KnotlessError(
        'pds-error',
        `The PDS signed in ${safeText(did)} instead of ${identity.did}; not logged in.`,
      );
    }
    ctx.sessions.setCurrent(did);
    // The app-password session this replaced is ended at the PDS too (best effort, see revoke()).
    if (previous?.kind === 'password')
      await new PasswordSession(previous, ctx.sessions, ctx.client(previous.pds)).revoke();
    const stored = ctx.sessions.get(did);
    if (stored?.kind !== 'oauth') throw new Error('the OAuth session was not stored');
    return stored;
  } finally {
    callback.close();
  }
}
