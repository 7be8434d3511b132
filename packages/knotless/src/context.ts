import { SessionStore } from './auth/store.ts';
import { readConfig, type Config } from './config/env.ts';
import { IdentityResolver } from './identity/resolver.ts';
import { transportFor, type Transport } from './xrpc/transport.ts';
import { XrpcClient, type Authorizer } from './xrpc/client.ts';

/** What every command needs: configuration, the connection pool, identity and sessions. */
export class Context {
  readonly config: Config;
  readonly transport: Transport;
  readonly resolver: IdentityResolver;
  readonly sessions: SessionStore;

  constructor(config: Config = readConfig()) {
    this.config = config;
    this.transport = transportFor(config);
    this.resolver = new IdentityResolver(config, this.transport);
    this.sessions = new SessionStore(config.configDir);
  }

  /** An XRPC client for a service, optionally authorized. */
  client(service: string, authorizer?: Authorizer): XrpcClient {
    return new XrpcClient(this.config.service ?? service, {
      transport: this.transport,
      trace: this.config.trace,
      ...(authorizer === undefined ? {} : { authorizer }),
    });
  }
}
