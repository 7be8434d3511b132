import type { Config } from 'knotless-core/config/env';
import { isKnotlessError } from 'knotless-core/errors';
import type { Identity } from 'knotless-core/identity/resolver';
import { REFS_COLLECTION } from 'knotless-core/records/collections';
import { parseRefRecord } from 'knotless-core/records/ref-record';
import { refTableKey } from 'knotless-core/records/ref-table';
import type { RemoteRepo } from 'knotless-core/records/remote-repo';
import { safeText } from 'knotless-core/text/terminal';
import { XrpcError, type XrpcClient } from 'knotless-core/xrpc/client';
import { pdsRefusal } from 'knotless-core/xrpc/pds-errors';
import type { Transport } from 'knotless-core/xrpc/transport';
import type { WroteChange } from './client.ts';
import type { Landed } from './group-commit.ts';
import { PdsStream } from './stream.ts';
import { Views, writeWireRefs, type WireRef } from './views.ts';

/**
 * How long a helper's question waits for the event stream to deliver the account's latest commit.
 * The reference PDS emits a commit at most about a second after it is written (its sequencer polls).
 */
const CATCH_UP_MS = 3000;

/** How many of its own latest group commits per account the agent knows by CID (see `#own`). */
const OWN_KEPT = 64;

/**
 * What the follower is handed (a `Context` is one, through `knotless agent`): the configuration, the
 * direct transport, and clients and ref-record readers made over it.
 */
export interface FollowerServices {
  readonly config: Config;
  readonly transport: Transport;
  client(service: string): XrpcClient;
  remoteRepo(owner: Identity, name: string, warn: (message: string) => void): RemoteRepo;
  /** The identity cache on disk, which every knotless process of this cache directory reads. */
  readonly resolver: { readonly cache: { forget(didOrHandle: string): void } };
}

/** What the follower asks of the agent's group commit (group-commit.ts), which it does not own. */
export interface OwnCommits {
  /** True when the account's latest revision `rev` is the group commit's, all of its own since `seen`. */
  caughtUp(did: string, rev: string, seen: string): boolean;
  /** True when every commit from `since` up to `commit` is the group commit's own. */
  provenSince(commit: string, since: string): boolean;
}

/**
 * The agent's exact views of the repositories its helpers push to, kept current by following each
 * account's event stream (stream.ts), and the commit each account's views are complete at. Kept
 * apart from the socket and the group commit because it is the one place that decides whether a view
 * may answer git at once: every change (a stream event, a group commit, a helper's write, a failure)
 * comes here and is judged by the same state.
 */
export class Follower {
  readonly #ctx: FollowerServices;
  readonly #log: (line: string) => void;
  readonly #group: () => OwnCommits;
  readonly views = new Views();
  readonly #streams = new Map<string, PdsStream>();
  readonly #loading = new Map<string, Promise<void>>();
  /**
   * Per account, the commit its views are complete at: read before the first listing, then each
   * commit the event stream delivers, or one of ours that came right after it. A helper's listing
   * from a view carries it, and its write's `swapCommit` proves the listing (see RemoteRepo.viewProof).
   */
  readonly #heads = new Map<string, string>();
  /**
   * Accounts a write found moved past the commit their views were at (a swap refused): the stream
   * has not delivered that move yet. Until it delivers a commit, helpers are answered only once the
   * view is shown current (a read), not at once with a commit already known to be behind. The view
   * itself stays: the stream brings it up to date, in order, and nothing was written.
   */
  readonly #behind = new Map<string, string>();
  /**
   * The CIDs of our own group commits, by account, the last {@link OWN_KEPT}: their writes are in the
   * views from the PDS's answer to the applyWrites, so the event stream need not check them again.
   */
  readonly #own = new Map<string, string[]>();

  /** `group` is asked lazily: the group commit is made after the follower it reports to. */
  constructor(ctx: FollowerServices, log: (line: string) => void, group: () => OwnCommits) {
    this.#ctx = ctx;
    this.#log = log;
    this.#group = group;
  }

  /** A commit of the group commit's landed: its writes go into the views at once. */
  landed(did: string, rev: string, writes: Landed[], commit: string): void {
    const kept = this.#own.get(did) ?? [];
    kept.push(commit);
    if (kept.length > OWN_KEPT) kept.shift();
    this.#own.set(did, kept);
    const head = this.#heads.get(did);
    if (head !== undefined && this.#group().provenSince(commit, head)) this.#heads.set(did, commit);
    try {
      for (const w of writes) {
        const ref =
          w.cid === null ? null : { key: w.rkey, cid: w.cid, rev, record: parseRefRecord(w.record) };
        this.views.apply(did, w.rkey, ref, rev);
      }
    } catch (err) {
      // A record the views cannot read (no helper of ours writes one): they cannot follow this account.
      if (!isKnotlessError(err)) throw err;
      this.drop(this.views.drop({ did }), 'a group commit wrote a record it cannot read');
    }
  }

  /** Forgets what made the dropped views answer at once, for accounts no view follows any more. */
  drop(dropped: { repo: string; did: string }[], why: string): void {
    for (const v of dropped) {
      if (this.views.follows(v.did)) continue;
      this.#heads.delete(v.did);
      this.#behind.delete(v.did);
    }
    for (const v of dropped) this.#log(`dropped the view of ${safeText(v.did)}/${safeText(v.repo)}: ${why}`);
  }

  /**
   * A write for `did` found the account moved on (a refused swap): its views are behind until the
   * stream delivers a commit.
   */
  markBehind(did: string): void {
    const head = this.#heads.get(did);
    if (head !== undefined) this.#behind.set(did, head);
  }

  /** What a helper's push wrote, into the views at once; or its view found stale, dropped. */
  wrote(did: string, repo: string, change: WroteChange): void {
    if (change.invalidate === true) {
      const v = this.views.dropRepo(did, repo);
      if (v !== undefined) this.drop([v], 'a push found it stale');
    }
    for (const r of change.written ?? []) this.views.apply(did, r.key, r, r.rev ?? '');
    for (const key of change.deleted ?? []) this.views.apply(did, key, null, '');
  }

  async #follow(pds: string): Promise<PdsStream> {
    const running = this.#streams.get(pds);
    if (running !== undefined && !running.dead) return running;
    const { views } = this;
    const stream = new PdsStream(
      pds,
      {
        follows: (did) => views.follows(did),
        followed: () => views.dids(),
        ours: (did, commit) => this.#own.get(did)?.includes(commit) === true,
        apply: (did, changes, rev) => {
          for (const c of changes) views.apply(did, c.key, c.ref, rev);
        },
        head: (did, commit) => {
          if (views.follows(did)) this.#heads.set(did, commit);
        },
        drop: (did, why) => this.drop(views.drop(did === undefined ? { pds } : { did }), why),
        // A new handle, a move, a status change: the next command of any shell resolves it afresh,
        // so an old handle names nothing from now on rather than after the cache's time to live.
        identityChanged: (did) => this.#ctx.resolver.cache.forget(did),
      },
      this.#log,
    );
    this.#streams.set(pds, stream);
    const [{ IdResolver, MemoryCache }, { fetchOver }] = await Promise.all([
      import('./stream-libs.ts'),
      import('knotless-core/xrpc/transport'),
    ]);
    // Keys cached: @atproto/sync refreshes a cached key by itself when a commit's signature fails.
    const idResolver = new IdResolver({
      plcUrl: this.#ctx.config.plcUrl,
      fetch: fetchOver(this.#ctx.transport),
      didCache: new MemoryCache(),
    });
    void stream.run(idResolver).finally(() => {
      if (this.#streams.get(pds) === stream) this.#streams.delete(pds);
    });
    this.#log(`following ${safeText(pds)}`);
    return stream;
  }

  /** The account's latest commit and revision, as its PDS says now. */
  async #latest(owner: Identity): Promise<{ cid: string; rev: string }> {
    const res = await this.#ctx
      .client(owner.pds)
      .query<{ cid?: unknown; rev?: unknown }>('com.atproto.sync.getLatestCommit', { did: owner.did });
    if (typeof res.rev !== 'string' || typeof res.cid !== 'string')
      throw new Error('getLatestCommit answered without a commit and revision');
    return { cid: res.cid, rev: res.rev };
  }

  /**
   * Starts a view: once the account's stream is demonstrably live, reads the latest revision, then
   * lists; changes the stream delivers from the start on are applied over the listing.
   */
  load(owner: Identity, name: string): void {
    const k = Views.key(owner.did, name);
    if (this.#loading.has(k)) return;
    const { views } = this;
    const p = (async () => {
      const stream = await this.#follow(owner.pds);
      if (!(await stream.whenLive())) return;
      const view = views.begin(owner.did, name, owner.pds);
      const base = await this.#latest(owner);
      const remote = this.#ctx.remoteRepo(owner, name, this.#log);
      // A repository whose refs are in a ref table is not kept as a view of ref records, which
      // every reader ignores there: its helpers read the table themselves.
      if (await hasRefTable(this.#ctx, owner, name))
        throw new Error('a repository with a ref table, of which no view is kept yet');
      const refs = await remote.listRefs();
      // An empty listing says nothing of privacy: the repository record does.
      if (refs.length === 0) await remote.prepare();
      // A private repository's records are sealed, and the stream's cannot be applied: its helpers list.
      if (remote.isPrivate) throw new Error('a private repository, of which no view is kept');
      // The listing holds at least the base commit, maybe more: a later commit the stream delivers, or
      // our own on top of it, moves the head on; a write swapped on the base finds any commit between.
      if (!this.#heads.has(owner.did) && views.get(owner.did, name) === view)
        this.#heads.set(owner.did, base.cid);
      views.finish(view, refs, base.rev);
    })()
      .catch((err: unknown) => {
        this.drop(
          views.dropRepo(owner.did, name) ? [{ did: owner.did, repo: name }] : [],
          'its listing failed',
        );
        this.#log(`listing ${safeText(owner.did)}/${safeText(name)}: ${safeText(String(err))}`);
      })
      .finally(() => this.#loading.delete(k));
    this.#loading.set(k, p);
  }

  /**
   * The view of a repository, at once, with the commit it is complete at: a helper's write proves it
   * with `swapCommit` (and reads once before exiting when nothing did). Without a known commit, the
   * view only once it is shown current (a read of the latest revision).
   */
  async viewAt(owner: Identity, name: string): Promise<{ refs: WireRef[]; commit?: string } | undefined> {
    const stream = this.#streams.get(owner.pds);
    const view = this.views.get(owner.did, name);
    const head = this.#heads.get(owner.did);
    const atOnce = head !== undefined && this.#behind.get(owner.did) !== head;
    if (stream?.live === true && view?.ready === true && view.pds === owner.pds && atOnce)
      return { refs: writeWireRefs([...view.refs.values()]), commit: head };
    const refs = await this.#currentView(owner, name);
    return refs === undefined ? undefined : { refs };
  }

  /** The view of a repository when it is current now, else undefined (and a load is started). */
  async #currentView(owner: Identity, name: string): Promise<WireRef[] | undefined> {
    const stream = this.#streams.get(owner.pds);
    const view = this.views.get(owner.did, name);
    if (stream === undefined || !stream.live || view === undefined || view.pds !== owner.pds) {
      if (view === undefined || view.pds !== owner.pds) this.load(owner, name);
      return undefined;
    }
    if (!view.ready) return undefined;
    let latest: string;
    try {
      latest = (await this.#latest(owner)).rev;
    } catch (err) {
      this.#log(`reading the latest revision of ${safeText(owner.did)}: ${safeText(String(err))}`);
      return undefined;
    }
    const seen = stream.seen(owner.did);
    const caughtUp =
      view.baseRev >= latest ||
      seen >= latest ||
      this.#group().caughtUp(owner.did, latest, seen > view.baseRev ? seen : view.baseRev) ||
      (await stream.waitForRev(owner.did, latest, CATCH_UP_MS));
    // Dropped or replaced while we waited: the helper lists.
    if (!caughtUp || this.views.get(owner.did, name) !== view || !view.ready) return undefined;
    return writeWireRefs([...view.refs.values()]);
  }

  /** Stops following every stream, logging what each read (for the bench). */
  stop(): void {
    for (const [pds, s] of this.#streams) {
      this.#log(`${safeText(pds)}: ${s.frames} frames read, ${s.decoded} decoded`);
      this.#log(
        `${safeText(pds)}: ${s.checked} commits checked, ${s.ours} of our own group commits taken as written`,
      );
      s.stop();
    }
  }
}

/** Whether the owner's ref table of the repository exists (one getRecord; the PDS's plain answer). */
async function hasRefTable(ctx: FollowerServices, owner: Identity, name: string): Promise<boolean> {
  try {
    await ctx.client(owner.pds).query('com.atproto.repo.getRecord', {
      repo: owner.did,
      collection: REFS_COLLECTION,
      rkey: refTableKey(name, owner.did, owner.did),
    });
    return true;
  } catch (err) {
    if (err instanceof XrpcError && pdsRefusal(err) === 'record-missing') return false;
    throw err;
  }
}
