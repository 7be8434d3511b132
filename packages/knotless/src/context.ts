import type { Dispatcher } from 'undici';
import { SessionStore } from './auth/store.ts';
import { readConfig, type Config } from './config/env.ts';
import { IdentityResolver } from './identity/resolver.ts';
import { dispatcherFor } from './xrpc/transport.ts';
import { XrpcClient, type Authorizer } from './xrpc/client.ts';

/** What every command needs: configuration, the connection pool, identity and sessions. */
export class Context {
  readonly config: Config;
  readonly dispatcher: Dispatcher;
  readonly resolver: IdentityResolver;
  readonly sessions: SessionStore;

  constructor(config: Config = readConfig()) {
    this.config = config;
    this.dispatcher = dispatcherFor(config);
    this.resolver = new IdentityResolver(config, this.dispatcher);
    this.sessions = new SessionStore(config.configDir);
  }

  /** An XRPC client for a service, optionally authorized. */
  client(service: string, authorizer?: Authorizer): XrpcClient {
    return new XrpcClient(this.config.service ?? service, {
      dispatcher: this.dispatcher,
      trace: this.config.trace,
      ...(authorizer === undefined ? {} : { authorizer }),
    });
  }
}
