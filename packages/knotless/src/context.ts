import path from 'node:path';
import { findAgent, startAgentDetached, type AgentStart } from './agent/autostart.ts';
import { AgentClient, hostedLink, type AgentHost, type AgentLink } from './agent/client.ts';
import { SessionStore } from './auth/store.ts';
import { readConfig, type Config } from 'knotless-core/config/env';
import { checkFolders } from 'knotless-core/config/folders';
import { KnotlessError } from 'knotless-core/errors';
import { relocateAccount } from 'knotless-core/identity/account-state';
import { IdentityResolver, type Identity } from 'knotless-core/identity/resolver';
import { RemoteRepo } from 'knotless-core/records/remote-repo';
import { RepoRecords } from 'knotless-core/records/repo-records';
import { privacyOpener } from 'knotless-core/private/open';
import { UploadBudgets } from 'knotless-core/xrpc/rate-limit';
import { transportFor, type Transport } from 'knotless-core/xrpc/transport';
import { XrpcClient, type Authorizer } from 'knotless-core/xrpc/client';
import { printErr } from 'knotless-core/text/terminal';

/** What every command needs: configuration, the connection pool, identity and sessions. */
export class Context {
  readonly config: Config;
  readonly transport: Transport;
  readonly resolver: IdentityResolver;
  readonly sessions: SessionStore;
  /** What this command's answers said of each PDS's budget for blob uploads (see UploadBudgets). */
  readonly uploadBudgets = new UploadBudgets();
  /** Told of each request retry (the helper sets it when git asks for verbosity); silent when unset. */
  retryNotice: ((notice: string) => void) | undefined;
  /** The warm agent, when one is running: its socket's client, or the agent itself when hosted. */
  readonly agent: AgentLink | undefined;
  /** Why an agent's socket or directory was not used (another user's…): one sentence to print. */
  readonly agentRefusal: string | undefined;
  /** This context serves a helper run inside the warm agent (see the constructor). */
  readonly hosted: boolean;
  #mayStartAgent: boolean;
  /** KNOTLESS_VERIFY=0 was said on stderr (once a command). */
  #saidUnchecked = false;

  /**
   * `hosted`: this context serves a helper run inside the warm agent (agent/helper-host.ts), which it
   * reaches by calls (not through its own socket); the connection pool is the agent's own and stays
   * open when the context closes.
   */
  constructor(config: Config = readConfig(), opts: { agent?: boolean; hosted?: AgentHost | undefined } = {}) {
    // Before anything in them is read: folders others can write are not trusted (config/folders.ts).
    checkFolders(config);
    this.config = config;
    this.hosted = opts.hosted !== undefined;
    const shared = transportFor(config);
    const direct: Transport = this.hosted
      ? {
          request: (url, init) => shared.request(url, init),
          preconnect: (url) => shared.preconnect?.(url),
          close: () => {},
        }
      : shared;
    const found =
      opts.agent === false || !config.agent || opts.hosted !== undefined ? undefined : findAgent(config);
    this.agent =
      opts.hosted !== undefined
        ? hostedLink(opts.hosted, config.httpTimeoutMs)
        : found?.socket === undefined
          ? undefined
          : new AgentClient(found.socket, config.httpTimeoutMs);
    this.agentRefusal = found?.refusal;
    this.#mayStartAgent = found?.mayStart ?? false;
    this.transport = this.agent?.transport(direct) ?? direct;
    this.resolver = new IdentityResolver(config, this.transport);
    this.sessions = new SessionStore(config.configDir);
  }

  /**
   * Starts the warm agent in the background when none answered (absent, or its socket left by one
   * that died), at most once per process; this process carries on directly and a later one uses it.
   * Failures are warnings: the command itself never needed the agent. Resolves once a start that
   * failed has said so (on the next tick), so that a command may exit right after.
   */
  async startAgent(how: AgentStart): Promise<void> {
    if (this.agentRefusal !== undefined) how.warn(this.agentRefusal);
    if (!this.#mayStartAgent || (this.agent !== undefined && this.agent.alive)) return;
    this.#mayStartAgent = false;
    try {
      startAgentDetached(this.config, how);
      await new Promise((resolve) => setImmediate(resolve));
    } catch (err) {
      // This command goes direct whatever happened; a refused directory is said, once.
      if (!(err instanceof KnotlessError) && (err as NodeJS.ErrnoException).code === undefined) throw err;
      how.warn(
        err instanceof KnotlessError ? err.message : `the warm agent could not be started (${String(err)})`,
      );
    }
  }

  /** Closes connections so the process can exit. */
  close(): void {
    this.transport.close();
  }

  /**
   * An XRPC client for a service, optionally authorized. A read it makes of an account its PDS no
   * longer serves resolves the account again at once (not after the cache's time to live): it follows
   * an account that moved, and says in one sentence what became of one deactivated, taken down or
   * deleted. `onMoved` is told the account's new identity.
   */
  client(service: string, authorizer?: Authorizer, onMoved?: (now: Identity) => void): XrpcClient {
    return new XrpcClient(this.config.service ?? service, {
      ...this.#clientOptions(authorizer),
      relocate: (did, from) =>
        relocateAccount(
          this.resolver,
          // Ungated: what it finds of the account is said over what became of the handle.
          (s) => new XrpcClient(s, this.#clientOptions(undefined, false)),
          did,
          from,
          onMoved,
        ),
    });
  }

  #clientOptions(authorizer?: Authorizer, gated = true): ConstructorParameters<typeof XrpcClient>[1] {
    return {
      transport: this.transport,
      trace: this.config.trace,
      retry: this.config.retry,
      onRetry: (notice) => this.retryNotice?.(notice),
      // Said whatever the verbosity: a push that waits a minute without a word looks hung.
      rateLimit: { boundMs: this.config.rateLimitWaitMs, notify: (line) => printErr(line) },
      budgets: this.uploadBudgets,
      ...(gated ? { gate: () => this.resolver.settle() } : {}),
      ...(authorizer === undefined ? {} : { authorizer }),
    };
  }

  /**
   * One repository's ref records on its owner's PDS, read and written through this context's clients.
   * When a read finds the owner moved, `owner` itself is updated, so that what follows (writes, the
   * agent's view) goes to the new PDS too.
   */
  remoteRepo(owner: Identity, name: string, warn: (message: string) => void): RemoteRepo {
    const moved = (now: Identity): void => void Object.assign(owner, now);
    const reader = this.client(owner.pds, undefined, moved);
    return new RemoteRepo(
      {
        reader,
        writer: (auth) => this.client(owner.pds, auth, moved),
        verify: {
          transport: this.transport,
          plcUrl: this.config.plcUrl,
          service: (named) => this.config.service ?? named ?? owner.pds,
          // Retried, waited out and said as the command's other reads are.
          client: (service) => this.client(service, undefined, moved),
          document: () => this.resolver.documentRead(owner),
          ...(this.config.verify ? {} : { unchecked: () => this.#sayUnchecked() }),
          revs: path.join(this.config.cacheDir, 'verified'),
        },
        member: async (did) => this.remoteRepo(await this.resolver.resolve(did), name, warn),
      },
      owner,
      name,
      warn,
      privacyOpener(this.config.configDir, reader, owner, name),
    );
  }

  /** The one line that says refs are read unchecked (KNOTLESS_VERIFY=0), once a command. */
  #sayUnchecked(): void {
    if (this.#saidUnchecked) return;
    this.#saidUnchecked = true;
    printErr(
      "knotless: warning: KNOTLESS_VERIFY=0: refs are read without checking their proofs against the account's signing key, so the PDS or anyone in between can change them; unset it to verify",
    );
  }

  /** Repository records (create, read, list, delete), through this context's clients. */
  repoRecords(): RepoRecords {
    return new RepoRecords((service, authorizer) => this.client(service, authorizer));
  }
}
