import type * as IdentityModule from '@atproto/identity';
import type { Index } from '../db/index-store.ts';
import { guardedFetch, type FetchLimits } from '../net/guard.ts';

/** A resolved account. */
export interface Owner {
  did: string;
  /** The handle, only when it resolves back to this DID. */
  handle: string | null;
  pds: string | null;
}

/** How long a resolution is trusted before the next event of the account refreshes it. */
const FRESH_MS = 60 * 60 * 1000;
/**
 * How long an account without a verified handle is trusted: a handle check that failed for want of an
 * answer (a slow PDS, a DNS hiccup) must not leave the pages showing a bare DID for the hour.
 */
const UNVERIFIED_MS = 60 * 1000;

/**
 * Resolves DIDs to their PDS and verified handle, and keeps the result in the index. `.test` handles
 * (the dev network's) have no DNS: in dev mode the account's PDS is asked instead.
 */
export class Identities {
  readonly #index: Index;
  readonly #dev: boolean;
  readonly #resolver: IdentityModule.IdResolver;
  readonly #mod: typeof IdentityModule;
  readonly #pending = new Map<string, Promise<Owner>>();
  readonly #fetch: typeof globalThis.fetch;
  readonly #log: (line: string) => void;

  private constructor(
    index: Index,
    dev: boolean,
    mod: typeof IdentityModule,
    plcUrl: string,
    limits: FetchLimits,
    log: (line: string) => void,
  ) {
    this.#index = index;
    this.#dev = dev;
    this.#log = log;
    this.#mod = mod;
    this.#fetch = guardedFetch(dev, limits);
    // Commits are verified with the account's key: without a cache every knotless commit on the
    // stream would cost a DID resolution. Only knotless accounts are ever resolved, so it stays small;
    // an identity event forces a fresh resolution (`owner(did, true)`).
    this.#resolver = new mod.IdResolver({
      plcUrl,
      timeout: 10_000,
      fetch: this.#fetch,
      didCache: new mod.MemoryCache(FRESH_MS, 24 * FRESH_MS),
    });
  }

  /**
   * Loads @atproto/identity and makes a resolver for `plcUrl` whose requests go through the address
   * guard. `log` hears why a handle could not be checked (the appview's log, which escapes).
   */
  static async create(
    index: Index,
    dev: boolean,
    plcUrl: string,
    limits: FetchLimits,
    log: (line: string) => void,
  ): Promise<Identities> {
    return new Identities(index, dev, await import('@atproto/identity'), plcUrl, limits, log);
  }

  /** The resolver the firehose verifies signatures with. */
  get idResolver(): IdentityModule.IdResolver {
    return this.#resolver;
  }

  /**
   * The `#atproto` signing key of the account's DID document, as a `did:key`: from the document the
   * last resolution read (`owner(did, true)` reads it afresh), or read again when `refresh`.
   */
  async signingKey(did: string, refresh = false): Promise<string> {
    return this.#resolver.did.resolveAtprotoKey(did, refresh);
  }

  /** The account, from the index while fresh; `refresh` forces a new resolution (an identity event). */
  async owner(did: string, refresh = false): Promise<Owner> {
    if (!refresh) {
      const known = await this.#index.owner(did);
      const fresh = known?.handle === null ? UNVERIFIED_MS : FRESH_MS;
      if (known !== undefined && Date.now() - Date.parse(known.resolved_at) < fresh) return known;
    }
    let p = this.#pending.get(did);
    if (p === undefined) {
      p = this.#resolve(did).finally(() => this.#pending.delete(did));
      this.#pending.set(did, p);
    }
    return p;
  }

  /**
   * The DID of a `.test` handle the index does not know yet, in dev mode (a reader signing in before
   * anything of theirs was indexed): such a handle has no DNS, so each PDS of the accounts the index
   * knows is asked, and the answer counts only when the DID's document claims the handle back, as for
   * every handle here. Undefined for any other handle, and outside dev mode.
   */
  async devHandle(handle: string): Promise<string | undefined> {
    const h = handle.toLowerCase();
    if (!this.#dev || !h.endsWith('.test')) return undefined;
    for (const pds of await this.#index.knownPdses()) {
      const did = await this.#resolveHandle(h, pds);
      if (did === undefined || !did.startsWith('did:plc:')) continue;
      if ((await this.owner(did, true)).handle === h) return did;
    }
    return undefined;
  }

  /**
   * The account's PDS, from its DID document, without keeping anything: for accounts that may turn
   * out to hold no knotless records (discovery through a relay without listReposByCollection).
   */
  async pdsOf(did: string): Promise<string | null> {
    const known = await this.#index.owner(did);
    if (known !== undefined) return known.pds;
    const doc = await this.#resolver.did.resolve(did);
    return doc === null ? null : (this.#mod.getPds(doc)?.replace(/\/+$/, '') ?? null);
  }

  /**
   * What the account's own PDS (the one its DID document names now) says of it: null when active,
   * else its status (`deactivated`, `takendown`, `suspended`; `deleted` when the PDS holds no such
   * repository any more); undefined when no answer came, to be decided by a later event. An
   * `#account` event counts for nothing by itself: one from a PDS the account left says
   * "deactivated" of an account that is active elsewhere.
   */
  async status(owner: Owner): Promise<string | null | undefined> {
    if (owner.pds === null) return 'deleted';
    const url = `${owner.pds}/xrpc/com.atproto.sync.getRepoStatus?did=${encodeURIComponent(owner.did)}`;
    let res: Response;
    try {
      res = await this.#fetch(url);
    } catch (err) {
      this.#log(`checking the status of ${owner.did} at ${owner.pds}: ${String(err)}`);
      return undefined;
    }
    let body: { active?: unknown; status?: unknown; error?: unknown };
    try {
      body = JSON.parse(await res.text()) as typeof body;
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      this.#log(`checking the status of ${owner.did} at ${owner.pds}: the answer is not JSON`);
      return undefined;
    }
    if (!res.ok) return body.error === 'RepoNotFound' ? 'deleted' : undefined;
    if (body.active === true) return null;
    return typeof body.status === 'string' && /^[a-z]{1,32}$/.test(body.status) ? body.status : 'inactive';
  }

  async #resolve(did: string): Promise<Owner> {
    const doc = await this.#resolver.did.resolve(did, true);
    if (doc === null) return { did, handle: null, pds: null };
    const pds = this.#mod.getPds(doc)?.replace(/\/+$/, '') ?? null;
    const claimed = this.#mod.getHandle(doc)?.toLowerCase();
    let handle: string | null = null;
    if (claimed !== undefined) {
      const back = await this.#resolveHandle(claimed, pds);
      if (back === did) handle = claimed;
    }
    await this.#index.putOwner(did, handle, pds);
    return { did, handle, pds };
  }

  /**
   * The DID `handle` resolves to, or undefined when it cannot be resolved now: the handle is then not
   * verified. Only a failure to get an answer means that; anything else surfaces.
   */
  async #resolveHandle(handle: string, pds: string | null): Promise<string | undefined> {
    // @atproto/identity answers undefined itself for every DNS and HTTPS failure: nothing to catch.
    if (!handle.endsWith('.test')) return this.#resolver.handle.resolve(handle);
    if (!this.#dev || pds === null) return undefined;
    const url = `${pds}/xrpc/com.atproto.identity.resolveHandle?handle=${encodeURIComponent(handle)}`;
    let res: Response;
    try {
      res = await this.#fetch(url);
    } catch (err) {
      // fetch rejects only when no answer came (refused, reset, timed out, a refused address).
      this.#log(`checking the handle ${handle} at ${pds}: ${String(err)}`);
      return undefined;
    }
    if (!res.ok) return undefined;
    // The body is already read (fetchOver buffers it): text() cannot fail, and JSON.parse is checked.
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      if (!(err instanceof SyntaxError)) throw err;
      this.#log(`checking the handle ${handle} at ${pds}: the answer is not JSON`);
      return undefined;
    }
    const did = typeof body === 'object' && body !== null ? (body as { did?: unknown }).did : undefined;
    return typeof did === 'string' ? did : undefined;
  }
}
