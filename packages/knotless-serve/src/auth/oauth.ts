// The appview's OAuth client (@atproto/oauth-client-node). Behind a public https URL it is a
// confidential client: its metadata at /oauth-client-metadata.json, its JWKS at /oauth/jwks.json,
// signed with the server's key. On a loopback URL (the dev network) it is the loopback client a
// PDS accepts without fetching metadata. Either way it asks for the CLI's scopes, no more.
import type * as OAuthModule from '@atproto/oauth-client-node';
import type { Kysely } from 'kysely';
import { KNOTLESS_OAUTH_SCOPE } from 'knotless-core/forge/oauth-scope';
import type { Database } from '../db/schema.ts';
import type { Identities } from '../ingest/identities.ts';
import type { Index } from '../db/index-store.ts';
import type { ServerKey } from './server-key.ts';

export type OAuth = typeof OAuthModule;
export type OAuthClient = InstanceType<OAuth['NodeOAuthClient']>;

/** How long an authorization may stay in flight before its state is dropped. */
const STATE_TTL_MS = 60 * 60_000;

export interface SignIn {
  oauth: OAuth;
  client: OAuthClient;
  /** Where the PDS sends the reader back. */
  redirectUri: string;
  /** True for a confidential client (public https URL): the JWKS is served. */
  confidential: boolean;
  /** The public JWKS of a confidential client. */
  jwks: unknown;
  /**
   * The app state an in-flight authorization was begun with (the hash of its browser's nonce),
   * read without spending the authorization, so a callback from another browser is refused
   * before any token is asked for.
   */
  appStateOf(stateKey: string): Promise<string | undefined>;
  /** The PDS that granted an account's stored session (its tokens' audience), if one is stored. */
  grantedBy(did: string): Promise<string | undefined>;
}

/** True for a URL on this machine, where a loopback client is the form PDSes accept. */
export function isLoopback(url: string): boolean {
  const host = new URL(url).hostname.toLowerCase();
  return host === 'localhost' || host === '[::1]' || /^127\./.test(host);
}

/** The library's stores on the index, every value sealed with the server's key, bound to its row. */
function stores(db: Kysely<Database>, key: ServerKey) {
  return {
    stateStore: {
      async get(k: string) {
        const row = await db.selectFrom('oauth_states').selectAll().where('key', '=', k).executeTakeFirst();
        if (row === undefined || Date.now() - Date.parse(row.created_at) > STATE_TTL_MS) return undefined;
        return JSON.parse(key.open(row.sealed, `state:${k}`)) as OAuthModule.NodeSavedState;
      },
      async set(k: string, v: OAuthModule.NodeSavedState) {
        const sealed = key.seal(JSON.stringify(v), `state:${k}`);
        // Old states (sign-ins never finished) go as new ones come.
        const old = new Date(Date.now() - STATE_TTL_MS).toISOString();
        await db.deleteFrom('oauth_states').where('created_at', '<', old).execute();
        await db
          .insertInto('oauth_states')
          .values({ key: k, sealed, created_at: new Date().toISOString() })
          .onConflict((oc) => oc.column('key').doUpdateSet({ sealed }))
          .execute();
      },
      async del(k: string) {
        await db.deleteFrom('oauth_states').where('key', '=', k).execute();
      },
    },
    sessionStore: {
      async get(did: string) {
        const row = await db
          .selectFrom('oauth_sessions')
          .selectAll()
          .where('did', '=', did)
          .executeTakeFirst();
        return row === undefined
          ? undefined
          : (JSON.parse(key.open(row.sealed, `session:${did}`)) as OAuthModule.NodeSavedSession);
      },
      async set(did: string, v: OAuthModule.NodeSavedSession) {
        const sealed = key.seal(JSON.stringify(v), `session:${did}`);
        const updated_at = new Date().toISOString();
        await db
          .insertInto('oauth_sessions')
          .values({ did, sealed, updated_at })
          .onConflict((oc) => oc.column('did').doUpdateSet({ sealed, updated_at }))
          .execute();
      },
      async del(did: string) {
        // The library found the session revoked or expired: so are the browser sessions on it.
        await db.deleteFrom('oauth_sessions').where('did', '=', did).execute();
        await db.deleteFrom('web_sessions').where('did', '=', did).execute();
      },
    },
  };
}

/**
 * Identities for the library, resolved by the appview's own resolver (its address guard, PLC, the
 * dev network's `.test` handles through the index): the DID document, and the handle when verified.
 */
function resolvers(index: Index, identities: Identities) {
  const didOf = async (handle: string): Promise<`did:plc:${string}` | null> => {
    const known = await index.owner(handle.toLowerCase());
    if (known !== undefined) return known.did as `did:plc:${string}`;
    const did = (await identities.devHandle(handle)) ?? (await identities.idResolver.handle.resolve(handle));
    return (did ?? null) as `did:plc:${string}` | null;
  };
  return {
    handleResolver: { resolve: didOf },
    identityResolver: {
      async resolve(input: string) {
        const did = input.startsWith('did:') ? input : await didOf(input);
        if (did === null) throw new Error(`the handle ${input} does not resolve`);
        const doc = await identities.idResolver.did.resolve(did, true);
        if (doc === null) throw new Error(`no DID document for ${did}`);
        const owner = await identities.owner(did, true);
        return {
          did: did as `did:plc:${string}`,
          handle: (owner.handle ?? 'handle.invalid') as `${string}.${string}`,
          // The document as @atproto/identity checked it; the library reads its PDS entry and handle.
          didDoc: doc as never,
        };
      },
    },
  };
}

/** Makes the sign-in client for the appview at `publicUrl`. */
export async function makeSignIn(opts: {
  publicUrl: string;
  key: ServerKey;
  index: Index;
  identities: Identities;
  fetch: typeof globalThis.fetch;
  dev: boolean;
}): Promise<SignIn> {
  const oauth = await import('@atproto/oauth-client-node');
  const base = opts.publicUrl.replace(/\/+$/, '');
  const redirectUri = `${base}/oauth/callback`;
  const confidential = !isLoopback(base);
  if (confidential && !base.startsWith('https://'))
    throw new Error(`sign-in needs the public URL to be https:// (it is ${base})`);
  const keyset = confidential ? [await oauth.JoseKey.fromImportable(opts.key.pem, 'knotless-serve-1')] : [];
  const clientMetadata = confidential
    ? {
        client_id: `${base}/oauth-client-metadata.json`,
        client_name: 'knotless',
        client_uri: base,
        redirect_uris: [redirectUri] as [string],
        scope: KNOTLESS_OAUTH_SCOPE,
        grant_types: ['authorization_code', 'refresh_token'] as ['authorization_code', 'refresh_token'],
        response_types: ['code'] as ['code'],
        application_type: 'web' as const,
        token_endpoint_auth_method: 'private_key_jwt' as const,
        token_endpoint_auth_signing_alg: 'ES256',
        dpop_bound_access_tokens: true,
        jwks_uri: `${base}/oauth/jwks.json`,
      }
    : oauth.atprotoLoopbackClientMetadata(
        oauth.buildAtprotoLoopbackClientId({
          scope: KNOTLESS_OAUTH_SCOPE,
          redirect_uris: [redirectUri],
        }),
      );
  const store = stores(opts.index.db, opts.key);
  const client = new oauth.NodeOAuthClient({
    clientMetadata,
    ...(confidential ? { keyset } : {}),
    responseMode: 'query',
    allowHttp: opts.dev,
    fetch: opts.fetch,
    // One process serves sign-in: an in-process lock keeps a refresh token from being spent twice.
    requestLock: oauth.requestLocalLock,
    ...store,
    ...resolvers(opts.index, opts.identities),
  });
  return {
    oauth,
    client,
    redirectUri,
    confidential,
    jwks: client.jwks,
    appStateOf: async (stateKey) => (await store.stateStore.get(stateKey))?.appState,
    grantedBy: async (did) => (await store.sessionStore.get(did))?.tokenSet.aud,
  };
}
