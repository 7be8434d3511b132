// The official atproto OAuth client (@atproto/oauth-client-node), set up for knotless: a loopback
// (public) client, knotless's own fetch and identity resolver, sessions in the 0600 session files,
// and a file lock around refreshes so that processes sharing a session spend its refresh token once.
import fs from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import type * as OAuthModule from '@atproto/oauth-client-node';
import type { AuthServices } from './services.ts';
import { KnotlessError } from 'knotless-core/errors';
import { KNOTLESS_OAUTH_SCOPE } from 'knotless-core/forge/oauth-scope';
import { WEBHOOK_RPC_SCOPE } from 'knotless-core/records/collections';
import { readJson, writeFileAtomic } from 'knotless-core/fsutil';
import { safeText } from 'knotless-core/text/terminal';
import { fetchOver } from 'knotless-core/xrpc/transport';
import { withSessionLock, type OAuthStoredSession, type SessionStore } from './store.ts';

/**
 * What `knotless login` asks for: the scope every knotless sign-in asks for, and service-auth tokens
 * for the appview's webhook methods, which only the CLI calls (see collections.ts).
 */
export const DEFAULT_SCOPE = `${KNOTLESS_OAUTH_SCOPE} ${WEBHOOK_RPC_SCOPE}`;

export type OAuth = typeof OAuthModule;
export type OAuthClient = InstanceType<OAuth['NodeOAuthClient']>;
type SavedSession = OAuthModule.NodeSavedSession;

/** The states of the authorizations a `knotless login` has in flight. */
export type LoginStates = ReturnType<typeof memoryStore<OAuthModule.NodeSavedState>>;

/** Loads the client library (a vendored bundle in the installed CLI) only when OAuth is used. */
export async function loadOAuth(): Promise<OAuth> {
  try {
    return await import('@atproto/oauth-client-node');
  } catch (err) {
    throw new KnotlessError(
      'login-failed',
      `The OAuth client could not be loaded on Node ${process.version} (${safeText(String(err), 200)}); log in with \`knotless login --app-password\` instead.`,
      { cause: err },
    );
  }
}

/** True for a URL on this machine; only there may OAuth servers speak plain http. */
export function isLoopbackUrl(url: string): boolean {
  const host = new URL(url).hostname.toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || host === '[::1]' || /^127\./.test(host);
}

/** The OAuth part of a session file; the rest of the file is knotless's (see store.ts). */
function sessionStoreFor(store: SessionStore, meta: Omit<OAuthStoredSession, 'oauth'>) {
  return {
    get(did: string): Promise<SavedSession | undefined> {
      const s = store.get(did);
      return Promise.resolve(
        s?.kind === 'oauth' && s.oauth !== undefined ? (s.oauth as unknown as SavedSession) : undefined,
      );
    },
    set(did: string, value: SavedSession): Promise<void> {
      if (did !== meta.did)
        return Promise.reject(new Error(`session for ${did} offered to ${meta.did}'s store`));
      store.put({ ...meta, oauth: value as unknown as OAuthStoredSession['oauth'] & object });
      return Promise.resolve();
    },
    del(did: string): Promise<void> {
      // The library deletes a session it found revoked or expired; the file goes with it, so that
      // the next command says "not logged in" rather than trying again.
      if (store.get(did)?.kind === 'oauth') fs.rmSync(store.fileFor(did), { force: true });
      return Promise.resolve();
    },
  };
}

/**
 * The library's lock seam, across processes: a lock on the session file (as the password sessions
 * take, see password-session.ts). The library re-reads the stored session inside it, so a process
 * that waited finds the tokens another one just got instead of spending the refresh token again.
 */
function fileLock(store: SessionStore) {
  return async <T>(name: string, fn: () => T | PromiseLike<T>): Promise<T> => {
    const did = name.replace(/^@atproto-oauth-client-/, '');
    const file = did.startsWith('did:') ? store.fileFor(did) : path.join(store.dir, 'sessions', 'oauth');
    // More patience than a password refresh: the library holds it across a whole token exchange.
    return withSessionLock(file, async () => fn(), 200);
  };
}

/**
 * Identities resolved by knotless's resolver (bidirectional handle checks, KNOTLESS_PLC_URL, the
 * cache), given to the library as the minimal DID document it reads: the PDS endpoint and handle.
 */
function identityResolverFor(ctx: AuthServices) {
  return {
    async resolve(input: string) {
      const id = await ctx.resolver.resolve(input);
      const pds = ctx.resolver.serviceFor(id);
      return {
        did: id.did as `did:plc:${string}`,
        handle: id.handle ?? 'handle.invalid',
        didDoc: {
          '@context': 'https://www.w3.org/ns/did/v1' as const,
          id: id.did as `did:plc:${string}`,
          alsoKnownAs: id.handle === undefined ? [] : [`at://${id.handle}`],
          service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: pds }],
        },
      };
    },
  };
}

/**
 * A small store on disk under the cache directory, for what every process would otherwise ask the
 * PDS again: its authorization-server metadata and its current DPoP nonce (without one, the first
 * request of each process is refused and sent again). Entries older than `ttlMs` are not used.
 */
function diskCache<V>(dir: string, ttlMs: number) {
  const fileOf = (k: string) =>
    path.join(dir, `${createHash('sha256').update(k).digest('hex').slice(0, 32)}.json`);
  return {
    get(k: string): Promise<V | undefined> {
      const e = readJson<{ at: number; key: string; value: V }>(fileOf(k));
      return Promise.resolve(
        e !== undefined && e.key === k && Date.now() - e.at < ttlMs ? e.value : undefined,
      );
    },
    set(k: string, value: V): Promise<void> {
      writeFileAtomic(fileOf(k), JSON.stringify({ at: Date.now(), key: k, value }));
      return Promise.resolve();
    },
    del(k: string): Promise<void> {
      fs.rmSync(fileOf(k), { force: true });
      return Promise.resolve();
    },
  };
}

/** In-memory state store: an authorization in flight lives only as long as `knotless login`. */
export function memoryStore<V>() {
  const m = new Map<string, V>();
  return {
    /** True when `k` is the state of an authorization this process started and has not finished. */
    has: (k: string) => m.has(k),
    get: (k: string) => Promise.resolve(m.get(k)),
    set: (k: string, v: V) => Promise.resolve(void m.set(k, v)),
    del: (k: string) => Promise.resolve(void m.delete(k)),
  };
}

/** A client for one session's metadata (the login's loopback client_id must be presented again). */
export async function oauthClientFor(
  ctx: AuthServices,
  store: SessionStore,
  meta: Omit<OAuthStoredSession, 'oauth'>,
  states: LoginStates = memoryStore(),
): Promise<{ oauth: OAuth; client: OAuthClient }> {
  const oauth = await loadOAuth();
  const client = new oauth.NodeOAuthClient({
    clientMetadata: oauth.atprotoLoopbackClientMetadata(meta.clientId),
    responseMode: 'query',
    // Plain http only for a PDS on this machine (the dev network); never a downgrade elsewhere.
    allowHttp: isLoopbackUrl(meta.pds),
    stateStore: states,
    sessionStore: sessionStoreFor(store, meta),
    requestLock: fileLock(store),
    identityResolver: identityResolverFor(ctx),
    handleResolver: {
      resolve: async (handle: string) => (await ctx.resolver.resolve(handle)).did as `did:plc:${string}`,
    },
    fetch: fetchOver(ctx.transport),
    authorizationServerMetadataCache: diskCache(
      path.join(ctx.config.cacheDir, 'oauth', 'servers'),
      10 * 60_000,
    ),
    // The reference PDS keeps a nonce valid for 3 minutes; a stale one costs one retry, as none would.
    dpopNonceCache: diskCache(path.join(ctx.config.cacheDir, 'oauth', 'nonces'), 2 * 60_000),
  });
  return { oauth, client };
}
