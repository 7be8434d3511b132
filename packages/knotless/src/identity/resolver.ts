import type * as IdentityModule from '@atproto/identity';
import type { Config } from '../config/env.ts';
import { fetchOver, type Transport } from '../xrpc/transport.ts';
import { KnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import { XrpcClient, XrpcError } from '../xrpc/client.ts';
import { IdentityCache, type CachedIdentity } from './cache.ts';

/** A resolved account: its DID, its verified handle, and the PDS that hosts it. */
export type Identity = CachedIdentity;

type IdResolverModule = typeof IdentityModule;

/**
 * Resolves handles and DIDs to the PDS that hosts them, with the disk cache in front.
 * @atproto/identity does the resolving and is imported only on a cache miss, to keep start-up fast.
 */
export class IdentityResolver {
  readonly #config: Config;
  readonly #transport: Transport;
  readonly cache: IdentityCache;

  constructor(config: Config, transport: Transport) {
    this.#config = config;
    this.#transport = transport;
    this.cache = new IdentityCache(config.cacheDir, config.identityTtlSeconds);
  }

  /** Resolves a handle or DID, from the cache while it is fresh. */
  async resolve(actor: string): Promise<Identity> {
    const isDid = actor.startsWith('did:');
    const cachedDid = isDid ? actor : this.cache.handle(actor);
    const cached = cachedDid === undefined ? undefined : this.cache.did(cachedDid);
    if (cached !== undefined) return cached;

    // Only what was resolved before is in the cache, so validating on a miss is enough.
    const { isValidDid, isValidHandle } = await import('@atproto/syntax');
    if (isDid ? !isValidDid(actor) : !isValidHandle(actor)) {
      throw new KnotlessError(
        'unknown-handle',
        `"${actor}" is not a valid handle or DID; use a handle like alice.bsky.social.`,
      );
    }
    const mod = await import('@atproto/identity');
    const did = cachedDid ?? (await this.#resolveHandle(mod, actor));
    const identity = await this.#resolveDid(mod, did, isDid ? undefined : actor);
    this.cache.put(identity);
    return identity;
  }

  /** The endpoint requests for this identity go to: KNOTLESS_SERVICE when set, else its PDS. */
  serviceFor(identity: Identity): string {
    return this.#config.service ?? identity.pds;
  }

  #idResolver(mod: IdResolverModule): InstanceType<IdResolverModule['IdResolver']> {
    // Our own fetch so that KNOTLESS_CA_CERTS applies and a dev PLC on loopback is reachable; the
    // library's default fetch refuses private addresses, a guard for servers, not for this CLI.
    const f = fetchOver(this.#transport);
    return new mod.IdResolver({ plcUrl: this.#config.plcUrl, timeout: 10_000, fetch: f });
  }

  async #resolveHandle(mod: IdResolverModule, handle: string): Promise<string> {
    if (handle.endsWith('.test')) return this.#resolveDevHandle(handle);
    let did: string | undefined;
    try {
      did = await this.#idResolver(mod).handle.resolve(handle);
    } catch (err) {
      throw new KnotlessError(
        'unknown-handle',
        `Could not resolve the handle ${safeText(handle)}: ${safeText(String(err))}.`,
        {
          cause: err,
        },
      );
    }
    if (did === undefined) {
      throw new KnotlessError(
        'unknown-handle',
        `The handle ${handle} does not resolve to an account; check its spelling.`,
      );
    }
    return did;
  }

  /** `.test` handles have no DNS: the dev network's PDS answers for them. */
  async #resolveDevHandle(handle: string): Promise<string> {
    const pds = this.#config.devPds ?? this.#config.service;
    if (pds === undefined) {
      throw new KnotlessError(
        'unknown-handle',
        `${handle} is a dev-network handle; source the env file that \`knotless dev\` wrote (it sets KNOTLESS_DEV_PDS) and try again.`,
      );
    }
    const client = new XrpcClient(pds, { transport: this.#transport, trace: this.#config.trace });
    try {
      const { did } = await client.query<{ did: string }>('com.atproto.identity.resolveHandle', { handle });
      return did;
    } catch (err) {
      if (err instanceof XrpcError && err.status === 400) {
        throw new KnotlessError(
          'unknown-handle',
          `The handle ${handle} does not exist on the dev network; check its spelling.`,
          {
            cause: err,
          },
        );
      }
      throw err;
    }
  }

  async #resolveDid(
    mod: IdResolverModule,
    did: string,
    claimedHandle: string | undefined,
  ): Promise<Identity> {
    let doc;
    try {
      doc = await this.#idResolver(mod).did.resolve(did, true);
    } catch (err) {
      throw new KnotlessError(
        'pds-unreachable',
        `Could not resolve ${did} at ${this.#config.plcUrl} (${String(err)}); check your connection and KNOTLESS_PLC_URL.`,
        { cause: err },
      );
    }
    if (doc === null) throw new KnotlessError('unknown-handle', `No account has the DID ${did}; check it.`);
    const pds = mod.getPds(doc);
    if (pds === undefined)
      throw new KnotlessError('unknown-handle', `The account ${did} names no PDS in its DID document.`);
    const docHandle = mod.getHandle(doc);
    if (claimedHandle !== undefined && docHandle?.toLowerCase() !== claimedHandle.toLowerCase()) {
      throw new KnotlessError(
        'unknown-handle',
        `The handle ${safeText(claimedHandle)} points at ${safeText(did)}, whose DID document does not claim it back; the handle is not verified.`,
      );
    }
    return { did, handle: docHandle, pds: pds.replace(/\/+$/, '') };
  }
}
