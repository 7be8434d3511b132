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
 *
 * A gap is the stream's word (a relay's `OutdatedCursor` or `FutureCursor`), and a hostile or broken
 * relay can say it without end: passes for gaps start at most once every `gapMs`, whatever the
 * relays; gaps reported meanwhile wait, merged into the one pass that starts when the time is up.
 */
export class Resync {
  readonly #running = new Set<Promise<void>>();
  #full: Promise<void> | undefined;
  #fullAgain: FullPass | undefined;
  readonly #pending = new Set<string>();
  #draining = false;
  /** When the last pass for a gap started (performance.now()). */
  #lastGap = -Infinity;
  /** The pass for the gaps reported since, and the timer that starts it. */
  #gapWaiting: { pass: FullPass; timer: NodeJS.Timeout } | undefined;
  #accountsRead = 0;

  readonly #sources: ResyncSources;
  readonly #index: Index;
  readonly #identities: Identities;
  readonly #transport: Transport;
  readonly #changed: (did: string, repo: string) => void;
  readonly #log: (line: string) => void;
  readonly #gapMs: number;

  constructor(
    sources: ResyncSources,
    index: Index,
    identities: Identities,
    transport: Transport,
    changed: (did: string, repo: string) => void,
    log: (line: string) => void,
    gapMs: number,
  ) {
    this.#gapMs = gapMs;
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
      this.#fullAgain = next === undefined ? pass : merged(next, pass);
      return;
    }
    this.#full = this.#track(this.#fullPass(pass)).finally(() => {
      this.#full = undefined;
      const again = this.#fullAgain;
      this.#fullAgain = undefined;
      if (again !== undefined) this.full(again);
    });
  }

  /**
   * A stream lost events: a full pass, at once unless one for a gap started less than `gapMs` ago;
   * then when that time is up, one pass for every gap reported until then.
   */
  gap(pass: FullPass): void {
    const waiting = this.#gapWaiting;
    if (waiting !== undefined) {
      waiting.pass = merged(waiting.pass, pass);
      return;
    }
    const wait = this.#lastGap + this.#gapMs - performance.now();
    if (wait <= 0) {
      this.#lastGap = performance.now();
      this.full(pass);
      return;
    }
    const timer = setTimeout(() => {
      const due = this.#gapWaiting;
      this.#gapWaiting = undefined;
      if (due === undefined) return;
      this.#lastGap = performance.now();
      this.full(due.pass);
    }, wait);
    timer.unref();
    this.#gapWaiting = { pass, timer };
  }

  /** How many times an account was read whole (each full pass reads every one of its accounts). */
  get accountsRead(): number {
    return this.#accountsRead;
  }

  /** Whether a pass for a gap waits for its time. */
  get gapWaiting(): boolean {
    return this.#gapWaiting !== undefined;
  }

  /** Drops the pass waiting for a gap, if any (the streams are stopped). */
  stop(): void {
    clearTimeout(this.#gapWaiting?.timer);
    this.#gapWaiting = undefined;
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

  /** Settles when no pass is running or queued (a pass for a gap waiting for its time is neither). */
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
    this.#accountsRead += 1;
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

/** One pass that reads what both would. */
function merged(a: FullPass, b: FullPass): FullPass {
  return { relays: [...new Set([...a.relays, ...b.relays])], known: a.known || b.known };
}
