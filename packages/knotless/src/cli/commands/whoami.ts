import { activeSession } from '../../auth/login.ts';
import { expiry } from '../../auth/password-session.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { generalFailure } from 'knotless-core/xrpc/client';
import type { StoredSession } from '../../auth/store.ts';
import { JSON_OPTION, type Command } from '../command.ts';

/** Loopback (public) OAuth clients' sessions end this long after they were granted, at the latest. */
const OAUTH_SESSION_LIFETIME_MS = 14 * 24 * 3600_000;

/** A JWT's `exp` (seconds) as a Date. */
function seconds(exp: number | undefined): Date | undefined {
  return exp === undefined ? undefined : new Date(exp * 1000);
}

/** How a session was made and when it ends, from what is stored (read again: it may just have been refreshed). */
function describe(
  s: Partial<StoredSession> & Pick<StoredSession, 'kind'>,
  oneOff: boolean,
): {
  method: 'oauth' | 'app-password' | 'environment';
  expiresAt: string | undefined;
  scope: string | undefined;
  summary: string;
} {
  if (s.kind === 'oauth' && 'createdAt' in s && s.createdAt !== undefined) {
    const ends = new Date(Date.parse(s.createdAt) + OAUTH_SESSION_LIFETIME_MS).toISOString();
    const scope = s.oauth?.tokenSet.scope;
    return {
      method: 'oauth',
      expiresAt: ends,
      scope,
      summary: `Logged in with OAuth on ${s.createdAt}; the session ends by ${ends} at the latest (then log in again). Scopes: ${safeText(scope ?? 'unknown')}.`,
    };
  }
  const refresh =
    'refreshJwt' in s && typeof s.refreshJwt === 'string' ? seconds(expiry(s.refreshJwt)) : undefined;
  const ends = refresh?.toISOString();
  if (oneOff) {
    return {
      method: 'environment',
      expiresAt: ends,
      scope: undefined,
      summary: 'Logged in for this process with KNOTLESS_IDENTIFIER and KNOTLESS_PASSWORD (an app password).',
    };
  }
  return {
    method: 'app-password',
    expiresAt: ends,
    scope: undefined,
    summary: `Logged in with an app password; the session ends ${ends === undefined ? 'when the PDS says so' : `by ${ends} unless renewed (knotless renews it as it is used)`}.`,
  };
}

export const command: Command = {
  name: 'whoami',
  args: '',
  summary: 'show the account commands act as',
  options: { json: JSON_OPTION },
  positionals: { min: 0, max: 0 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const auth = await activeSession(c);
    // Asking the PDS proves the session still works (and refreshes it when due). The handle is
    // resolved afresh meanwhile: it may have changed since login, and a PDS's word for a handle is
    // no proof, so it is the one the DID document claims and that resolves back to the DID.
    const [session, identity] = await Promise.allSettled([
      c.client(auth.session.pds, auth).query<{ did: unknown }>('com.atproto.server.getSession'),
      c.resolver.resolve(auth.session.did, { fresh: true }),
    ]);
    if (session.status === 'rejected') throw generalFailure(session.reason, 'checking your session');
    if (session.value.did !== auth.session.did) {
      throw new KnotlessError(
        'pds-error',
        `The PDS at ${safeText(auth.session.pds)} says this session belongs to another account; log in again.`,
      );
    }
    const { did, pds } = auth.session;
    let handle = auth.session.handle;
    if (identity.status === 'fulfilled') {
      // No verified handle now: the DID stands for the account, as at a login without one. The
      // stored session takes a handle verified now, so that `login` and messages find it by it.
      const now = identity.value.handle;
      handle = now ?? did;
      if (now !== undefined && now !== auth.session.handle && c.sessions.get(did) !== undefined)
        await c.sessions.rename(did, now);
    } else {
      // Nothing proves the handle either way (its DNS or the PLC did not answer): the one verified
      // last is shown, said to be such.
      io.err(
        `knotless: could not verify the handle again (${safeText(identity.reason instanceof Error ? identity.reason.message : String(identity.reason))}); showing the one verified at login.`,
      );
    }
    // KNOTLESS_IDENTIFIER's one-off session is not the saved one, even for the same account.
    const oneOff = c.config.identifier !== undefined;
    const how = describe(oneOff ? auth.session : (c.sessions.get(did) ?? auth.session), oneOff);
    if (args.values['json'] === true) {
      io.out(safeJson({ handle, did, pds, ...how }));
      return;
    }
    io.out(`${safeText(handle)} (${did}) on ${safeText(pds)}`);
    // On stderr: stdout stays the one line scripts read.
    io.err(how.summary);
  },
};
