import type { Config } from 'knotless-core/config/env';
import type { IdentityResolver } from 'knotless-core/identity/resolver';
import type { Authorizer, XrpcClient } from 'knotless-core/xrpc/client';
import type { Transport } from 'knotless-core/xrpc/transport';
import type { SessionStore } from './store.ts';

/**
 * What logging in and sessions are handed by the front end that runs them (the CLI's and the
 * helper's `Context` is one): named here so that auth/ depends on these few services, not on the
 * Context that is built above it.
 */
export interface AuthServices {
  readonly config: Config;
  readonly transport: Transport;
  readonly resolver: IdentityResolver;
  readonly sessions: SessionStore;
  /** An XRPC client for a service, optionally authorized. */
  client(service: string, authorizer?: Authorizer): XrpcClient;
}
