import type { Transport } from 'knotless-core';
import type { Index } from '../db/index-store.ts';
import { backfillAccount, listPdsAccounts } from './backfill.ts';
import { discoverAccounts, eachLimited } from './discover.ts';
import type { Identities } from './identities.ts';

/** Where the accounts to read whole come from. */
export interface ResyncSources {
  dids: string[];
  /** PDSes whose every account is read (com.atproto.sync.listRepos). */
  pdses: string[];
}

/** What one full pass reads besides the sources' accounts and PDSes. */
export interface FullPass {
  /** The relays to discover accounts through. */
  relays: string[];
  /** Also every account the index already knows: owners and authors (a stream lost their events). */
  known: boolean;
}

/** How many accounts are read at once. */
const CONCURRENCY = 8;

/**
 * Reads accounts' knotless records whole from their PDSes: every account of the sources at start
 * and again after a stream lost events (a full pass), one account after a #sync event or an event
 * that could not be indexed (a recheck). Passes never overlap: one asked for while another runs
 * starts once it ends, once however often it was asked for. The streams run meanwhile; rows carry
 * revisions, so which write lands first does not matter.
 */
export class Resync {
  readonly #running = new Set<Promise<void>>();
  #full: Promise<void> | undefined;
  #fullAgain: FullPass | undefined;
  readonly #pending = new Set<string>();
  #draining = false;

  readonly #sources: ResyncSources;
  readonly #index: Index;
  readonly #identities: Identities;
  readonly #transport: Transport;
  readonly #changed: (did: string, repo: string) => void;
  readonly #log: (line: string) => void;

  constructor(
    sources: ResyncSources,
    index: Index,
    identities: Identities,
    transport: Transport,
    changed: (did: string, repo: string) => void,
    log: (line: string) => void,
  ) {
    this.#sources = sources;
    this.#index = index;
    this.#identities = identities;
    this.#transport = transport;
    this.#changed = changed;
    this.#log = log;
  }

  /** Reads every account of the configured DIDs and PDSes, and those `pass` names (again). */
  full(pass: FullPass): void {
    if (this.#full !== undefined) {
      const next = this.#fullAgain;
      this.#fullAgain = {
        relays: [...new Set([...(next?.relays ?? []), ...pass.relays])],
        known: (next?.known ?? false) || pass.known,
      };
      return;
    }
    this.#full = this.#track(this.#fullPass(pass)).finally(() => {
      this.#full = undefined;
      const again = this.#fullAgain;
      this.#fullAgain = undefined;
      if (again !== undefined) this.full(again);
    });
  }

  /** Reads one account again. */
  recheck(did: string): void {
    this.#pending.add(did);
    this.#startDrain();
  }

  #startDrain(): void {
    if (this.#draining) return;
    this.#draining = true;
    void this.#track(this.#drain()).finally(() => {
      this.#draining = false;
      // One asked for after the last look at the queue, before this ran.
      if (this.#pending.size > 0) this.#startDrain();
    });
  }

  /** Settles when no pass is running or waiting. */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }

  #track(p: Promise<void>): Promise<void> {
    const tracked = p.catch((err: unknown) => {
      // Each account's failure is logged where it happens; this is anything else (the index
      // failing). Logged, not rethrown: the appview keeps serving what it has.
      this.#log(`backfill stopped: ${String(err)}`);
    });
    this.#running.add(tracked);
    void tracked.finally(() => this.#running.delete(tracked));
    return tracked;
  }

  async #drain(): Promise<void> {
    while (this.#pending.size > 0) {
      const dids = [...this.#pending];
      this.#pending.clear();
      await eachLimited(dids, CONCURRENCY, (did) => this.#account(did));
    }
  }

  async #fullPass(pass: FullPass): Promise<void> {
    const dids = new Set(this.#sources.dids);
    if (pass.known) {
      for (const r of await this.#index.reposWithRefs()) dids.add(r.did);
      for (const did of await this.#index.ownerDids()) dids.add(did);
    }
    for (const pds of this.#sources.pdses) {
      try {
        const shown = async (did: string) => (await this.#index.owner(did))?.status === null;
        for (const did of await listPdsAccounts(pds, this.#transport, shown)) dids.add(did);
      } catch (err) {
        this.#log(`listing accounts of ${pds}: ${String(err)}`);
      }
    }
    for (const relay of pass.relays) {
      try {
        const found = await discoverAccounts(relay, this.#transport, this.#identities, this.#log);
        this.#log(`${relay}: ${found.size} accounts with knotless records`);
        for (const did of found) dids.add(did);
      } catch (err) {
        this.#log(`discovering accounts through ${relay}: ${String(err)}`);
      }
    }
    await eachLimited(dids, CONCURRENCY, (did) => this.#account(did));
    // Mirrors may lag the index after a crash: bring every one up to date once.
    for (const r of await this.#index.reposWithRefs()) this.#changed(r.did, r.repo);
  }

  async #account(did: string): Promise<void> {
    try {
      for (const repo of await backfillAccount(
        did,
        this.#index,
        this.#identities,
        this.#transport,
        this.#log,
      ))
        this.#changed(did, repo);
    } catch (err) {
      this.#log(`backfilling ${did}: ${String(err)}`);
    }
  }
}
