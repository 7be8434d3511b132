import path from 'node:path';
import type { AuthServices } from './services.ts';
import { KnotlessError } from 'knotless-core/errors';
import { accountMove } from 'knotless-core/identity/moved';
import type { Identity } from 'knotless-core/identity/resolver';
import { printErr, safeText } from 'knotless-core/text/terminal';
import { XrpcError, generalFailure } from 'knotless-core/xrpc/client';
import { PasswordSession } from './password-session.ts';
import { MoveAwareSession, movedSession } from './moved.ts';
import { OAuthSession } from './oauth-session.ts';
import {
  SessionStore,
  withSessionLock,
  type PasswordStoredSession,
  type SessionAuthorizer,
} from './store.ts';

/** How an identity is named in messages: its verified handle, else its DID. */
export function label(identity: { did: string; handle: string | undefined }): string {
  return safeText(identity.handle ?? identity.did);
}

/** How a login names the account it is about to sign in to: the verified handle and the DID. */
export function accountLine(identity: Identity): string {
  return identity.handle === undefined
    ? `${identity.did} (its DID document names no handle that points back to it)`
    : `${label(identity)} (${identity.did})`;
}

/**
 * Sends the password to the identity's PDS and returns the new session. The session's handle is the
 * one verified while resolving (the DID when none was), never what the PDS answers: a PDS could name
 * any handle, and stored sessions are looked up by it.
 */
async function createSession(
  ctx: AuthServices,
  identity: Identity,
  password: string,
): Promise<PasswordStoredSession> {
  const client = ctx.client(identity.pds);
  let res: { did: string; accessJwt: string; refreshJwt: string };
  try {
    res = await client.procedure('com.atproto.server.createSession', { identifier: identity.did, password });
  } catch (err) {
    if (err instanceof XrpcError && err.status === 401) {
      throw new KnotlessError(
        'wrong-password',
        `The PDS refused the password for ${label(identity)}; check it (an app password from your account's settings works best) and try again.`,
        { cause: err },
      );
    }
    throw generalFailure(err, 'logging in');
  }
  if (res.did !== identity.did) {
    throw new KnotlessError(
      'pds-error',
      `The PDS at ${safeText(identity.pds)} answered for ${safeText(String(res.did))} instead of ${identity.did}; not logged in.`,
    );
  }
  return {
    kind: 'password',
    did: identity.did,
    handle: identity.handle ?? identity.did,
    pds: identity.pds,
    accessJwt: res.accessJwt,
    refreshJwt: res.refreshJwt,
  };
}

/**
 * Logs in with a handle (or DID) and an app password, stores the session and makes it current. The
 * identity is resolved afresh, never from the cache, and `notice` is told where the password is about
 * to go before it is sent, so a user can stop at a name or server they do not expect.
 */
export async function login(
  ctx: AuthServices,
  identifier: string,
  password: string,
  notice: (line: string) => void = () => {},
): Promise<PasswordStoredSession> {
  const identity = await ctx.resolver.resolve(identifier, { fresh: true });
  const where = ctx.resolver.serviceFor(identity);
  notice(`Logging in as ${accountLine(identity)} on ${safeText(where)}`);
  const previous = ctx.sessions.get(identity.did);
  const session = await createSession(ctx, identity, password);
  // An OAuth session this login replaces is revoked first (it reads its tokens from the file this
  // overwrites); best effort, as the password login has succeeded and the old session expires anyway.
  if (previous?.kind === 'oauth') {
    await new OAuthSession(ctx, ctx.sessions, previous).revoke().catch((err: unknown) => {
      if (ctx.config.trace)
        printErr(`knotless: trace could not revoke the old OAuth session: ${safeText(String(err))}`);
    });
  }
  ctx.sessions.put(session);
  ctx.sessions.setCurrent(session.did);
  return session;
}

function authorizerFor(
  ctx: AuthServices,
  store: SessionStore,
  stored: PasswordStoredSession,
  relogin?: () => Promise<PasswordStoredSession>,
): PasswordSession {
  return new PasswordSession(stored, store, ctx.client(stored.pds), relogin);
}

/**
 * Where sessions made from KNOTLESS_IDENTIFIER + KNOTLESS_PASSWORD live: a store of their own, so
 * that they never become, replace or name the saved account (`current`), and `knotless logout` and a
 * later `knotless login` never see them. They are kept at all only so that a CI job or an agent
 * running many commands does not spend one createSession each (bsky.social allows 30 per 5 minutes).
 */
export function oneOffStore(ctx: AuthServices): SessionStore {
  return new SessionStore(path.join(ctx.config.configDir, 'one-off'));
}

/**
 * The one-off session of an account, made under the session file's lock: CI often starts several
 * processes at once with the same variables, and each making its own session would spend that many
 * logins of the PDS's allowance; the first makes it, the others find it on disk.
 */
async function firstSession(
  store: SessionStore,
  did: string,
  create: () => Promise<PasswordStoredSession>,
): Promise<PasswordStoredSession> {
  return withSessionLock(store.fileFor(did), async () => {
    const found = store.get(did);
    return found?.kind === 'password' ? found : await create();
  });
}

/**
 * The session commands act as: KNOTLESS_IDENTIFIER + KNOTLESS_PASSWORD when set, for this process
 * only; otherwise the current account. The one-off session is reused while it lives; the password is
 * sent when there is none or it has died (a changed or revoked password shows up then). An OAuth
 * session (oauth-session.ts) authorizes requests the same way, through the same interface.
 */
export async function activeSession(ctx: AuthServices): Promise<SessionAuthorizer> {
  const { identifier, password } = ctx.config;
  if (identifier !== undefined) {
    if (password === undefined) {
      throw new KnotlessError(
        'not-logged-in',
        'KNOTLESS_IDENTIFIER is set without KNOTLESS_PASSWORD; set both, or neither.',
      );
    }
    const store = oneOffStore(ctx);
    const identity = await ctx.resolver.resolve(identifier);
    const relogin = async (): Promise<PasswordStoredSession> => {
      const session = await createSession(ctx, identity, password);
      store.put(session);
      return session;
    };
    // A session made on the PDS the account has since moved away from is no session there: log in
    // again where it lives now (the password is the account's, wherever it is).
    const found = store.get(identity.did);
    const usable = found?.kind === 'password' && found.pds === identity.pds ? found : undefined;
    const stored =
      usable ?? (found === undefined ? await firstSession(store, identity.did, relogin) : await relogin());
    return new MoveAwareSession(authorizerFor(ctx, store, stored, relogin), ctx, true);
  }
  const did = ctx.sessions.current();
  const stored = did === undefined ? undefined : ctx.sessions.get(did);
  if (stored === undefined) {
    throw new KnotlessError(
      'not-logged-in',
      'You are not logged in; run `knotless login <handle>` (or set KNOTLESS_IDENTIFIER and KNOTLESS_PASSWORD).',
    );
  }
  // Sessions name the PDS they were made on (KNOTLESS_SERVICE's, for an OAuth session made through it).
  const known = ctx.config.service === undefined ? ctx.resolver.cache.did(stored.did) : undefined;
  const move = accountMove(stored.pds, known?.pds);
  if (move !== undefined) throw movedSession(known?.handle ?? stored.handle, move, false);
  const session =
    stored.kind === 'oauth'
      ? new OAuthSession(ctx, ctx.sessions, stored)
      : authorizerFor(ctx, ctx.sessions, stored);
  return new MoveAwareSession(session, ctx, false);
}
