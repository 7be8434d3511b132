import type * as IdentityModule from '@atproto/identity';
import type { Config } from '../config/env.ts';
import { fetchOver, type Transport } from '../xrpc/transport.ts';
import { KnotlessError } from '../errors.ts';
import { printErr, safeText } from '../text/terminal.ts';
import { XrpcClient, XrpcError } from '../xrpc/client.ts';
import { IdentityCache, type CachedIdentity } from './cache.ts';
import { atprotoData, fetchPlcDocument, type AtprotoData } from './did-doc.ts';
import { lookupHandle } from './handle-lookup.ts';
import { inactiveAccount } from './inactive.ts';

/** A resolved account: its DID, its verified handle, and the PDS that hosts it. */
export type Identity = CachedIdentity;

type IdResolverModule = typeof IdentityModule;
/** The library, imported the first time a lookup needs it: a did:web document (nothing else does). */
let identityModule: Promise<IdResolverModule> | undefined;
const loadIdentity = (): Promise<IdResolverModule> => (identityModule ??= import('@atproto/identity'));

/**
 * Resolves handles and DIDs to the PDS that hosts them, with the disk cache in front. Handles and
 * did:plc documents are read with this process's own clients (handle-lookup.ts, did-doc.ts), since a
 * cached handle is checked again on every command; @atproto/identity is imported for did:web only.
 */
export class IdentityResolver {
  readonly #config: Config;
  readonly #transport: Transport;
  readonly cache: IdentityCache;
  /** Handles answered from the cache, each being verified afresh meanwhile (see {@link settle}). */
  readonly #rechecks = new Map<string, Promise<KnotlessError | undefined>>();
  /**
   * The did:plc document each resolution read, by the identity it gave, until a verified read takes
   * it ({@link documentRead}): the document names the account's PDS and its signing key, so a cold
   * listing reads it once, not once for each.
   */
  readonly #documents = new WeakMap<Identity, Promise<unknown>>();

  constructor(config: Config, transport: Transport) {
    this.#config = config;
    this.#transport = transport;
    this.cache = new IdentityCache(config.cacheDir, config.identityTtlSeconds);
  }

  /**
   * Resolves a handle or DID, from the cache while it is fresh (`fresh: true` skips the cache, as
   * login does before it sends a password). Identity is bidirectional, whichever the input: a handle
   * counts only when it resolves to the DID and the DID's document claims it back. A handle that
   * fails is an error when it was the input, and is dropped (the DID is shown instead, as Bluesky
   * shows handle.invalid) when only a DID document claimed it, because anyone can write any handle
   * into their own DID document.
   */
  async resolve(actor: string, opts: { fresh?: boolean } = {}): Promise<Identity> {
    const isDid = actor.startsWith('did:');
    const input = isDid ? actor : actor.toLowerCase();
    if (opts.fresh !== true) {
      const cached = isDid ? this.cache.did(input) : this.cache.handle(input);
      if (cached !== undefined) {
        if (!isDid && !this.#rechecks.has(input)) {
          const read = this.#resolveDid(cached.did);
          this.#rechecks.set(input, this.#recheck(input, cached, read));
          // The recheck says its own failure; a verified read that finds no document reads it again.
          this.#documents.set(
            cached,
            read.then(
              (r) => r.doc,
              () => undefined,
            ),
          );
        }
        return cached;
      }
    }

    // Only what was resolved before is in the cache, so validating on a miss is enough.
    const { isValidDid, isValidHandle } = await import('@atproto/syntax');
    if (isDid ? !isValidDid(input) : !isValidHandle(input)) {
      throw new KnotlessError(
        'unknown-handle',
        `"${safeText(actor)}" is not a valid handle or DID; use a handle like alice.bsky.social.`,
      );
    }
    if (!isDid) {
      const did = await this.#resolveHandle(input);
      const { pds, claimed, doc } = await this.#resolveDid(did);
      if (claimed?.toLowerCase() !== input) {
        throw new KnotlessError(
          'unknown-handle',
          `The handle ${input} points at ${did}, whose DID document does not claim it back; the handle is not verified.`,
        );
      }
      const identity = { did, handle: input, pds };
      this.cache.put(identity);
      if (doc !== undefined) this.#documents.set(identity, Promise.resolve(doc));
      return identity;
    }
    const { pds, claimed, doc } = await this.#resolveDid(input);
    const handle = claimed !== undefined && isValidHandle(claimed) ? claimed.toLowerCase() : undefined;
    let verified: boolean | 'unknown' = false;
    if (handle !== undefined) {
      try {
        verified = (await this.#lookupHandle(handle)) === input;
      } catch (err) {
        // A KnotlessError here means the handle cannot be resolved from this configuration (a `.test`
        // handle off the dev network): as good as a no. Anything else (a timeout, a DNS failure)
        // proves nothing either way: no handle now and nothing cached, so the next run tries again
        // instead of showing the DID for a day.
        verified = err instanceof KnotlessError ? false : 'unknown';
      }
    }
    const identity = { did: input, handle: verified === true ? handle : undefined, pds };
    if (verified !== 'unknown') this.cache.put(identity);
    if (doc !== undefined) this.#documents.set(identity, Promise.resolve(doc));
    return identity;
  }

  /**
   * The did:plc document read by the resolution that gave `identity` (the object {@link resolve}
   * returned), handed over once: a verified read of the account's refs checks them against the key
   * in the document that named its PDS, rather than reading the document again. Undefined when that
   * resolution read none (a DID from the cache, a did:web) or it was taken already, so that a later
   * read, in a process that lives on (the agent), reads the document afresh.
   */
  documentRead(identity: Identity): Promise<unknown> | undefined {
    const doc = this.#documents.get(identity);
    this.#documents.delete(identity);
    return doc;
  }

  /**
   * Waits for the handles answered from the cache to be verified afresh, and throws the sentence of
   * the first that no longer names the DID it was cached with. A handle can change hands at any time
   * (its owner renames, someone else takes it), so a cached pair is used only for what runs in
   * parallel with its check: the clients of a command await this before a write and before handing
   * back an answer (`XrpcClientOptions.gate`), and nothing reaches git or the user before it.
   */
  async settle(): Promise<void> {
    for (const check of this.#rechecks.values()) {
      const failed = await check;
      if (failed !== undefined) throw failed;
    }
  }

  /**
   * Resolves a cached handle afresh, both ways at once (the handle's DID, and the DID's document
   * claiming it), and says why the cached pair no longer holds; updates the cache either way. A
   * failure that proves nothing (no network) keeps the cached pair, as before.
   */
  async #recheck(
    handle: string,
    cached: Identity,
    document: Promise<{ pds: string; claimed: string | undefined }>,
  ): Promise<KnotlessError | undefined> {
    try {
      const [did, doc] = await Promise.all([
        this.#resolveHandle(handle).catch((err: unknown) => {
          // A handle that resolves to no account is a no. Anything else (a PDS, DNS or host that did
          // not answer) proves nothing and is thrown, to keep the cached pair (below); an account
          // gone away is said.
          if (err instanceof KnotlessError && err.code === 'unknown-handle') return undefined;
          throw err;
        }),
        document,
      ]);
      if (did === cached.did && doc.claimed?.toLowerCase() === handle) {
        if (doc.pds !== cached.pds) this.cache.put({ ...cached, pds: doc.pds });
        return undefined;
      }
      this.cache.forget(handle);
      this.cache.put({ did: cached.did, handle: undefined, pds: doc.pds });
      const now = did === undefined ? 'it names no account now' : `it names ${did} now`;
      return new KnotlessError(
        'unknown-handle',
        `The handle ${handle} no longer belongs to ${cached.did} (${now}); run the command again, or name the account by its DID.`,
      );
    } catch (err) {
      // A handle whose account went away: that sentence, rather than the first request's answer.
      if (err instanceof KnotlessError && err.code === 'account-inactive') return err;
      if (this.#config.trace)
        printErr(`knotless: trace could not verify the handle ${handle} again: ${safeText(String(err))}`);
      return undefined;
    }
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

  /** The DID a handle is registered to; a `unknown-handle` error when it has none. */
  async #resolveHandle(handle: string): Promise<string> {
    let did: string | undefined;
    try {
      did = await this.#lookupHandle(handle);
    } catch (err) {
      if (err instanceof KnotlessError) throw err;
      throw new KnotlessError(
        'unknown-handle',
        `Could not resolve the handle ${safeText(handle)}: ${safeText(String(err))}.`,
        { cause: err },
      );
    }
    if (did === undefined) {
      const failure = handle.endsWith('.test') ? undefined : await dnsFailure(handle);
      if (failure !== undefined) {
        throw new KnotlessError(
          'pds-unreachable',
          `Could not resolve the handle ${handle}: the DNS lookup failed (${safeText(failure)}), so whether it exists is unknown; check your network connection and try again.`,
        );
      }
      // A handle its PDS serves (`https://<handle>/.well-known/atproto-did`) stops resolving while
      // the account is deactivated or taken down; that host still says so of the repository.
      if (!handle.endsWith('.test')) await this.#inactiveHandle([`https://${handle}`], handle, true);
      throw new KnotlessError(
        'unknown-handle',
        handle.endsWith('.test')
          ? `The handle ${handle} does not exist on the dev network; check its spelling.`
          : `The handle ${handle} does not resolve to an account; check its spelling.`,
      );
    }
    return did;
  }

  /** The DID a handle resolves to (DNS or https for real handles), or undefined when it resolves to none. */
  async #lookupHandle(handle: string): Promise<string | undefined> {
    const did = handle.endsWith('.test')
      ? await this.#lookupDevHandle(handle)
      : await lookupHandle(this.#transport, handle, 10_000);
    // What a DNS record or a server says is checked before it reaches a message or a request.
    const { isValidDid } = await import('@atproto/syntax');
    return did !== undefined && isValidDid(did) ? did : undefined;
  }

  /**
   * `.test` handles have no DNS: the dev network's PDSes answer for them, each for the accounts it
   * holds, so each is asked. A PDS an account moved away from still answers with its DID, under the
   * handle it had there: when the PDSes disagree, the DID whose document claims the handle wins
   * (the caller checks that again either way).
   */
  async #lookupDevHandle(handle: string): Promise<string | undefined> {
    const pdses = this.#config.devPdses.length > 0 ? this.#config.devPdses : [this.#config.service];
    const { isValidDid } = await import('@atproto/syntax');
    const candidates = new Set<string>();
    // Every dev PDS at once: one round trip, not one per PDS.
    await Promise.all(
      pdses.map(async (pds) => {
        if (pds === undefined) {
          throw new KnotlessError(
            'unknown-handle',
            `${handle} is a dev-network handle; source the env file that \`knotless dev\` wrote (it sets KNOTLESS_DEV_PDS) and try again.`,
          );
        }
        const client = new XrpcClient(pds, { transport: this.#transport, trace: this.#config.trace });
        try {
          const { did } = await client.query<{ did: unknown }>('com.atproto.identity.resolveHandle', {
            handle,
          });
          if (typeof did === 'string' && isValidDid(did)) candidates.add(did);
        } catch (err) {
          if (!(err instanceof XrpcError && err.status === 400)) throw err;
        }
      }),
    );
    if (candidates.size === 0) await this.#inactiveHandle(pdses, handle, false);
    if (candidates.size <= 1) return [...candidates][0];
    for (const did of candidates) {
      const { claimed } = await this.#resolveDid(did);
      if (claimed?.toLowerCase() === handle) return did;
    }
    return [...candidates][0];
  }

  /**
   * A PDS resolves no handle of an account it holds deactivated or taken down, but still says so of
   * its repository (describeRepo takes a handle): then the user is told what became of the account,
   * not to check the handle's spelling. `quiet`: a host that does not answer is passed over.
   */
  async #inactiveHandle(pdses: Array<string | undefined>, handle: string, quiet: boolean): Promise<void> {
    for (const pds of pdses) {
      if (pds === undefined) continue;
      const client = new XrpcClient(pds, { transport: this.#transport, trace: this.#config.trace });
      try {
        await client.query('com.atproto.repo.describeRepo', { repo: handle });
      } catch (err) {
        // A handle's own host need not be a PDS, nor answer: then the handle does not resolve.
        if (!(err instanceof XrpcError) && !quiet) throw err;
        if (!(err instanceof XrpcError)) continue;
        if (err.error === 'RepoDeactivated') throw inactiveAccount(handle, pds, 'deactivated');
        if (err.error === 'RepoTakendown') throw inactiveAccount(handle, pds, 'takendown');
      }
    }
  }

  /**
   * A DID's PDS and the handle its document claims (unverified: the caller checks it), with a
   * did:plc document as read (see {@link documentRead}).
   */
  async #resolveDid(did: string): Promise<{ pds: string; claimed: string | undefined; doc?: unknown }> {
    let data: AtprotoData | null;
    let doc: unknown;
    try {
      if (did.startsWith('did:plc:')) {
        doc = await fetchPlcDocument(this.#transport, this.#config.plcUrl, did, AbortSignal.timeout(10_000));
        data = doc === null ? null : atprotoData(did, doc);
      } else {
        const m = await loadIdentity();
        const doc = await this.#idResolver(m).did.resolve(did, true);
        data = doc === null ? null : { pds: m.getPds(doc), claimed: m.getHandle(doc) };
      }
    } catch (err) {
      throw new KnotlessError(
        'pds-unreachable',
        `Could not resolve ${did} at ${this.#config.plcUrl} (${safeText(String(err))}); check your connection and KNOTLESS_PLC_URL.`,
        { cause: err },
      );
    }
    if (data === null) throw new KnotlessError('unknown-handle', `No account has the DID ${did}; check it.`);
    if (data.pds === undefined)
      throw new KnotlessError('unknown-handle', `The account ${did} names no PDS in its DID document.`);
    return {
      pds: data.pds.replace(/\/+$/, ''),
      claimed: data.claimed,
      ...(doc === undefined ? {} : { doc }),
    };
  }
}

/**
 * Why DNS could not say whether `_atproto.<handle>` exists, or undefined when it answered (a record,
 * no such name, no such record). @atproto/identity folds every failure into "no DID", so a resolver
 * that is down would read as a misspelt handle; one more question tells the two apart.
 */
async function dnsFailure(handle: string): Promise<string | undefined> {
  const dns = await import('node:dns/promises');
  try {
    await dns.resolveTxt(`_atproto.${handle}`);
    return undefined;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === 'ENOTFOUND' || code === 'ENODATA' ? undefined : (code ?? String(err));
  }
}
