import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import type { XrpcClient } from 'knotless-core/xrpc/client';
import { XrpcError, generalFailure } from 'knotless-core/xrpc/client';
import { isAuthRejection } from 'knotless-core/xrpc/pds-errors';
import {
  withSessionLock,
  type PasswordStoredSession,
  type SessionAuthorizer,
  type SessionStore,
} from './store.ts';

/** Seconds before expiry at which an access token is renewed rather than sent. */
const RENEW_MARGIN_S = 60;

/** The `exp` claim of a JWT, in seconds; undefined when the token cannot be read. */
export function expiry(jwt: string): number | undefined {
  const payload = jwt.split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const exp = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp : undefined;
  } catch (err) {
    // A token whose payload is not JSON has no expiry we can read: it is sent as it is, and the
    // PDS's ExpiredToken answer renews it (see authorize's retry).
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}

function expiresSoon(jwt: string): boolean {
  const exp = expiry(jwt);
  return exp === undefined || exp - RENEW_MARGIN_S < Date.now() / 1000;
}

/**
 * Authorizes requests with an app-password session, refreshing tokens when they expire. Refresh
 * tokens are single-use, so the refresh happens under a file lock and re-reads the file first:
 * when another process refreshed meanwhile, its tokens are adopted instead of spending a second one.
 */
export class PasswordSession implements SessionAuthorizer {
  #session: PasswordStoredSession;
  readonly #store: SessionStore;
  readonly #client: XrpcClient;
  /** Called when the refresh token itself is dead; may log in again (e.g. from KNOTLESS_PASSWORD). */
  readonly #relogin: (() => Promise<PasswordStoredSession>) | undefined;

  constructor(
    session: PasswordStoredSession,
    store: SessionStore,
    client: XrpcClient,
    relogin?: () => Promise<PasswordStoredSession>,
  ) {
    this.#session = session;
    this.#store = store;
    this.#client = client;
    this.#relogin = relogin;
  }

  /** The account this session acts as. */
  get session(): PasswordStoredSession {
    return this.#session;
  }

  async headers(): Promise<Record<string, string>> {
    if (expiresSoon(this.#session.accessJwt)) await this.renew();
    return { authorization: `Bearer ${this.#session.accessJwt}` };
  }

  async renew(): Promise<boolean> {
    const stale = this.#session.accessJwt;
    return withSessionLock(this.#store.fileFor(this.#session.did), async () => {
      const found = this.#store.get(this.#session.did);
      // A session replaced meanwhile by an OAuth login is not this one's to refresh.
      const onDisk = found?.kind === 'password' ? found : undefined;
      if (onDisk !== undefined && onDisk.accessJwt !== stale && !expiresSoon(onDisk.accessJwt)) {
        this.#session = onDisk;
        return true;
      }
      this.#session = await this.#refresh(onDisk ?? this.#session);
      this.#store.put(this.#session);
      return true;
    });
  }

  async #refresh(current: PasswordStoredSession): Promise<PasswordStoredSession> {
    try {
      const res = await this.#client.procedure<{ accessJwt: string; refreshJwt: string }>(
        'com.atproto.server.refreshSession',
        undefined,
        { headers: { authorization: `Bearer ${current.refreshJwt}` } },
      );
      // The handle stays the one verified at login: the PDS's word for it is not proof (see login.ts).
      return { ...current, accessJwt: res.accessJwt, refreshJwt: res.refreshJwt };
    } catch (err) {
      if (err instanceof XrpcError && isAuthRejection(err)) {
        if (this.#relogin !== undefined) return this.#relogin();
        throw new KnotlessError(
          'session-expired',
          `Your session for ${safeText(current.handle)} has expired; run \`knotless login ${safeText(current.handle)}\` again.`,
          { cause: err },
        );
      }
      throw generalFailure(err, 'refreshing your session');
    }
  }

  /** Ends the session at the PDS (revoking its refresh token); failures are ignored, as logout goes on. */
  async revoke(): Promise<void> {
    try {
      await this.#client.procedure('com.atproto.server.deleteSession', undefined, {
        headers: { authorization: `Bearer ${this.#session.refreshJwt}` },
      });
    } catch (err) {
      // The PDS refused (a dead token needs no revoking) or could not be reached: the local session
      // is removed either way. Anything else is a bug, and surfaces.
      if (!(err instanceof XrpcError) && !isKnotlessError(err)) throw err;
    }
  }
}
