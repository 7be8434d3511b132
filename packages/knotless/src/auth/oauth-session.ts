import type { AuthServices } from './services.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import type { HttpRequest, HttpResponse } from 'knotless-core/xrpc/transport';
import { isBodySource, type RequestBody } from 'knotless-core/xrpc/request-body';
import { missingScope } from 'knotless-core/xrpc/pds-errors';
import { loadOAuth, oauthClientFor, type OAuth } from './oauth-client.ts';
import type { OAuthStoredSession, SessionAuthorizer, SessionStore } from './store.ts';

type Session = Awaited<ReturnType<Awaited<ReturnType<typeof oauthClientFor>>['client']['restore']>>;

/** The one sentence for a session the server no longer honours. */
export function sessionEnded(handle: string, cause?: unknown): KnotlessError {
  const h = safeText(handle);
  return new KnotlessError(
    'session-expired',
    `Your session for ${h} has expired or was revoked; run \`knotless login ${h}\` again.`,
    cause === undefined ? {} : { cause },
  );
}

/** True for the library's errors that mean the session is over. */
function isEnded(oauth: OAuth, err: unknown): boolean {
  return (
    err instanceof oauth.TokenRefreshError ||
    err instanceof oauth.TokenRevokedError ||
    err instanceof oauth.TokenInvalidError
  );
}

/**
 * Authorizes requests with an OAuth session: every request goes through the library's fetch handler,
 * which signs a DPoP proof for its method and URL, follows the server's nonces, and refreshes the
 * tokens (once, under the session file's lock) when they expire or are refused.
 */
export class OAuthSession implements SessionAuthorizer {
  readonly #stored: OAuthStoredSession;
  readonly #ctx: AuthServices;
  readonly #store: SessionStore;
  #restored: Promise<Session> | undefined;

  constructor(ctx: AuthServices, store: SessionStore, stored: OAuthStoredSession) {
    this.#ctx = ctx;
    this.#store = store;
    this.#stored = stored;
  }

  get session(): OAuthStoredSession {
    return this.#stored;
  }

  headers(): Promise<Record<string, string>> {
    return Promise.resolve({});
  }

  /**
   * The library already refreshed and retried once when the token was refused; a session it then
   * deleted is over, anything else stands as the server's answer.
   */
  renew(): Promise<boolean> {
    const now = this.#store.get(this.#stored.did);
    if (now?.kind !== 'oauth' || now.oauth === undefined)
      return Promise.reject(sessionEnded(this.#stored.handle));
    return Promise.resolve(false);
  }

  #restore(): Promise<Session> {
    this.#restored ??= (async () => {
      const { client } = await oauthClientFor(this.#ctx, this.#store, this.#stored);
      return client.restore(this.#stored.did, 'auto');
    })();
    return this.#restored;
  }

  async send(url: URL, init: HttpRequest): Promise<HttpResponse> {
    // Tokens go to the PDS they were issued for and nowhere else; other servers get the request bare.
    if (url.origin !== new URL(this.#stored.pds).origin) return this.#ctx.transport.request(url, init);
    let res: Response;
    try {
      const session = await this.#restore();
      res = await session.fetchHandler(`${url.pathname}${url.search}`, {
        method: init.method,
        headers: init.headers,
        ...(init.body === null ? {} : { body: (await bodyBytes(init.body)) as BodyInit }),
      });
    } catch (err) {
      throw this.#failure(await loadOAuth(), err);
    }
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => (headers[k] = v));
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status === 403) this.#checkScope(body);
    return { status: res.status, headers, body };
  }

  /** A write the granted scopes do not cover: one sentence naming the scope (the PDS names it). */
  #checkScope(body: Buffer): void {
    let e: { error?: unknown; message?: unknown };
    try {
      e = JSON.parse(body.toString('utf8')) as typeof e;
    } catch (err) {
      // A 403 whose body is not JSON names no scope: it stays the PDS's answer, for the caller.
      if (err instanceof SyntaxError) return;
      throw err;
    }
    const scope = missingScope({
      status: 403,
      error: typeof e.error === 'string' ? e.error : 'HTTP403',
      message: typeof e.message === 'string' ? e.message : '',
    });
    if (scope === undefined) return;
    const h = safeText(this.#stored.handle);
    throw new KnotlessError(
      'scope-missing',
      `Your OAuth session does not grant the scope ${safeText(scope, 200)} that this needs; run \`knotless login ${h}\` again to grant it.`,
    );
  }

  #failure(oauth: OAuth, err: unknown): unknown {
    if (err instanceof KnotlessError) return err;
    if (isEnded(oauth, err)) return sessionEnded(this.#stored.handle, err);
    const msg = err instanceof Error ? err.message : String(err);
    return new KnotlessError(
      'pds-unreachable',
      `Could not use your OAuth session with ${safeText(this.#stored.pds)} (${safeText(msg, 200)}); check your connection or the server's status, then try again.`,
      { cause: err },
    );
  }

  /** Revokes the tokens at the PDS; the library removes the session file either way. */
  async revoke(): Promise<void> {
    const { oauth, client } = await oauthClientFor(this.#ctx, this.#store, this.#stored);
    try {
      await client.revoke(this.#stored.did);
    } catch (err) {
      // A session already dead needs no revoking; other failures are reported (the file is gone).
      if (!isEnded(oauth, err)) throw this.#failure(oauth, err);
    }
  }
}

/**
 * A request body as bytes: the OAuth library's fetch may send a request twice (a new DPoP nonce), so
 * a body read from a file (a blob part, at most the PDS's blob limit) is read whole here.
 */
async function bodyBytes(body: RequestBody): Promise<Uint8Array | string | null> {
  if (!isBodySource(body)) return body;
  const pieces: Uint8Array[] = [];
  // Copied: a source may hand out the same reused buffer for every piece (see BodySource).
  for await (const piece of body.open()) pieces.push(Buffer.from(piece));
  return Buffer.concat(pieces);
}
