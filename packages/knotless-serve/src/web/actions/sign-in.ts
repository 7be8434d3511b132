// Signing in and out: the handle form, the OAuth redirect to the reader's PDS, the callback that
// starts a browser session, and sign-out, which revokes the tokens at the PDS.
import type http from 'node:http';
import { safeText } from 'knotless-core/text/terminal';
import { KNOTLESS_OAUTH_SCOPE } from 'knotless-core/forge/oauth-scope';
import { sessionCookie, signInBinding, signInBoundHere, type Viewer } from '../../auth/web-sessions.ts';
import { HTML_HEADERS, html, page } from '../html.ts';
import { HttpError, type Site } from '../site.ts';

/** The sign-in page: one field, the reader's handle. */
export function signInPage(site: Site, message?: string): string {
  if (site.signIn === undefined) throw new HttpError(404, 'Sign-in is not set up on this appview.');
  return page(
    'Sign in',
    html`<h1>Sign in</h1>
      <p>
        Sign in with your atproto account (Bluesky or any other PDS). Your PDS asks you to approve access to
        knotless's records only; everything you write lands in your own account.
      </p>
      ${message === undefined ? '' : html`<p class="error" role="alert">${message}</p>`}
      <form class="stack" method="post" action="/-/signin">
        <label for="handle">Handle</label>
        <input id="handle" name="handle" autocomplete="username" required placeholder="alice.bsky.social" />
        <button type="submit">Sign in</button>
      </form>`,
  );
}

/** POST /-/signin: starts the authorization at the handle's PDS and sends the browser there. */
export async function startSignIn(
  site: Site,
  form: URLSearchParams,
  res: http.ServerResponse,
): Promise<void> {
  const signIn = site.signIn;
  if (signIn === undefined) throw new HttpError(404, 'Sign-in is not set up on this appview.');
  const handle = (form.get('handle') ?? '').trim().replace(/^@/, '');
  if (!/^[A-Za-z0-9._:-]{3,253}$/.test(handle)) throw new HttpError(400, 'That is not a handle.');
  // The sign-in is bound to this browser: the callback is taken only with this nonce's cookie, so
  // a callback URL someone else began cannot sign this browser in as them.
  const binding = signInBinding(site.secure);
  let url: URL;
  try {
    url = await signIn.client.authorize(handle, { scope: KNOTLESS_OAUTH_SCOPE, state: binding.appState });
  } catch (err) {
    site.log(`sign-in of ${handle}: ${String(err)}`);
    throw new HttpError(
      400,
      `Could not start signing in ${safeText(handle)}: check the handle and try again.`,
    );
  }
  res
    .writeHead(303, {
      location: url.href,
      'set-cookie': binding.cookie,
      'cache-control': 'no-store',
    })
    .end();
}

/** The page for a callback the browser did not begin: nothing was signed in. */
function notThisBrowser(): string {
  return page(
    'Sign in',
    html`<h1>Sign in</h1>
      <p class="error" role="alert">
        This sign-in was not begun in this browser (or took over an hour), so nobody was signed in;
        <a class="u" href="/-/signin">sign in again</a> from here.
      </p>`,
  );
}

/**
 * GET /oauth/callback: the PDS sends the reader back; a browser session starts, when this browser
 * holds the cookie the sign-in began with. Otherwise it answers 403 with a page saying so, and
 * nothing is asked of the PDS.
 */
export async function finishSignIn(
  site: Site,
  req: http.IncomingMessage,
  params: URLSearchParams,
  res: http.ServerResponse,
): Promise<void> {
  const signIn = site.signIn;
  if (signIn === undefined) throw new HttpError(404, 'Sign-in is not set up on this appview.');
  const stateKey = params.get('state');
  const spent =
    stateKey === null ? undefined : signInBoundHere(req, await signIn.appStateOf(stateKey), site.secure);
  if (spent === undefined) {
    site.log('sign-in callback refused: not begun in this browser');
    res.writeHead(403, { ...HTML_HEADERS, 'cache-control': 'no-store' }).end(notThisBrowser());
    return;
  }
  // The sign-in's cookie goes once it matched, whatever comes of the exchange (setHeader: kept by
  // every answer below, the errors' too). A refused callback leaves it alone, so a page sending this
  // browser to someone else's callback cannot break the sign-in this browser has in flight.
  res.setHeader('set-cookie', spent);
  let did: string;
  try {
    // The library spends the authorization's state whatever the answer, a refusal's too.
    ({
      session: { did },
    } = await signIn.client.callback(params));
  } catch (err) {
    if (params.get('error') !== null)
      throw new HttpError(401, 'The sign-in was not approved; nothing was stored.');
    site.log(`sign-in callback: ${String(err)}`);
    throw new HttpError(400, 'The sign-in could not be completed; try again.');
  }
  const owner = await site.identities.owner(did, true);
  const cookie = await site.sessions.create(did, owner.handle ?? did);
  res
    .writeHead(303, {
      location: '/',
      'set-cookie': [sessionCookie(cookie, site.secure), spent],
      'cache-control': 'no-store',
    })
    .end();
}

/** POST /-/signout: revokes the tokens at the PDS and ends the account's browser sessions here. */
export async function signOut(site: Site, viewer: Viewer, res: http.ServerResponse): Promise<void> {
  const signIn = site.signIn;
  if (signIn !== undefined) {
    try {
      // The library revokes at the PDS and deletes the stored session (our store ends the browser
      // sessions with it).
      await signIn.client.revoke(viewer.did);
    } catch (err) {
      site.log(`revoking ${viewer.did}: ${String(err)}`);
    }
  }
  await site.sessions.endAll(viewer.did);
  res
    .writeHead(303, {
      location: '/',
      'set-cookie': sessionCookie('', site.secure),
      'cache-control': 'no-store',
    })
    .end();
}
