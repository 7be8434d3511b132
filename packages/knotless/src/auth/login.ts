import type { Context } from '../context.ts';
import { KnotlessError } from '../errors.ts';
import { XrpcError, generalFailure } from '../xrpc/client.ts';
import { PasswordSession } from './password-session.ts';
import type { StoredSession } from './store.ts';

/** Logs in with a handle (or DID) and an app password, stores the session and makes it current. */
export async function login(ctx: Context, identifier: string, password: string): Promise<StoredSession> {
  const identity = await ctx.resolver.resolve(identifier);
  const client = ctx.client(identity.pds);
  let res: { did: string; handle: string; accessJwt: string; refreshJwt: string };
  try {
    res = await client.procedure('com.atproto.server.createSession', { identifier: identity.did, password });
  } catch (err) {
    if (err instanceof XrpcError && err.status === 401) {
      throw new KnotlessError(
        'wrong-password',
        `The PDS refused the password for ${identifier}; check it (an app password from your account's settings works best) and try again.`,
        { cause: err },
      );
    }
    throw generalFailure(err, 'logging in');
  }
  const session: StoredSession = {
    kind: 'password',
    did: res.did,
    handle: res.handle,
    pds: identity.pds,
    accessJwt: res.accessJwt,
    refreshJwt: res.refreshJwt,
  };
  ctx.sessions.put(session);
  ctx.sessions.setCurrent(session.did);
  return session;
}

function authorizerFor(
  ctx: Context,
  stored: StoredSession,
  relogin?: () => Promise<StoredSession>,
): PasswordSession {
  return new PasswordSession(stored, ctx.sessions, ctx.client(stored.pds), relogin);
}

/**
 * The session commands act as: KNOTLESS_IDENTIFIER + KNOTLESS_PASSWORD when set (logging in without
 * a prompt when there is no stored session yet), otherwise the current account. This is the seam
 * where OAuth sessions will slot in: anything that implements Authorizer.
 */
export async function activeSession(ctx: Context): Promise<PasswordSession> {
  const { identifier, password } = ctx.config;
  if (identifier !== undefined) {
    if (password === undefined) {
      throw new KnotlessError(
        'not-logged-in',
        'KNOTLESS_IDENTIFIER is set without KNOTLESS_PASSWORD; set both, or neither.',
      );
    }
    const relogin = () => login(ctx, identifier, password);
    const stored = ctx.sessions.find(identifier) ?? (await relogin());
    return authorizerFor(ctx, stored, relogin);
  }
  const did = ctx.sessions.current();
  const stored = did === undefined ? undefined : ctx.sessions.get(did);
  if (stored === undefined) {
    throw new KnotlessError(
      'not-logged-in',
      'You are not logged in; run `knotless login <handle>` (or set KNOTLESS_IDENTIFIER and KNOTLESS_PASSWORD).',
    );
  }
  return authorizerFor(ctx, stored);
}
