import type { Config } from 'knotless-core/config/env';
import { isKnotlessError } from 'knotless-core/errors';
import type { Identity } from 'knotless-core/identity/resolver';
import { REFS_COLLECTION, REFS_PART_COLLECTION } from 'knotless-core/records/collections';
import {
  lastTableRead,
  lastTeamRead,
  openVerifiedReads,
  parseMemberRead,
  parseStoredTable,
  parseTableRead,
  readMemberTable,
  readRepoRefs,
} from 'knotless-core/records/read-refs';
import { parseRefRecord } from 'knotless-core/records/ref-record';
import { maintainersOf, refTableKey, type FetchedPart } from 'knotless-core/records/ref-table';
import type { RemoteRepo } from 'knotless-core/records/remote-repo';
import { safeText } from 'knotless-core/text/terminal';
import type { XrpcClient } from 'knotless-core/xrpc/client';
import type { Transport } from 'knotless-core/xrpc/transport';
import type { WroteChange } from './client.ts';
import type { Landed } from './group-commit.ts';
import { PdsStream } from './stream.ts';
import {
  Views,
  writeWireRefs,
  type RepoView,
  type TableChange,
  type WireMember,
  type WireRef,
  type WireTable,
} from './views.ts';

/**
 * How long a helper's question waits for the event stream to deliver the account's latest commit.
 * The reference PDS emits a commit at most about a second after it is written (its sequencer polls).
 */
const CATCH_UP_MS = 3000;

/** How many of its own latest group commits per account the agent knows by CID (see `#own`). */
const OWN_KEPT = 64;

/** How many parts of ref tables per account the stream delivered are kept by CID (see `#parts`). */
const PARTS_KEPT = 256;
/** Ref tables found behind kept per account (their CIDs): a push swaps on one table at a time. */
const TABLES_BEHIND_KEPT = 64;

/** One change of a ref table or part record, from a checked stream commit (value null: deleted). */
export interface TableRecordChange {
  collection: string;
  key: string;
  cid: string | null;
  value: unknown;
}

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
   * With the commit, its revision ('' when unknown): the head only moves forward. A push's own write
   * or group commit moves it on at once, and the stream, delivering the commits before it later, must
   * not take it back (the next push's swap on the older commit would be refused and sent again).
   */
  readonly #heads = new Map<string, { commit: string; rev: string }>();
  /**
   * Accounts a write found moved past the commit their views were at (a swap refused): the stream
   * has not delivered that move yet. Until it delivers a commit, helpers are answered only once the
   * view is shown current (a read), not at once with a commit already known to be behind. The view
   * itself stays: the stream brings it up to date, in order, and nothing was written.
   */
  readonly #behind = new Map<string, string>();
  /**
   * Ref tables, by account, that a write swapped on and found moved (a refused swap) before the
   * stream delivered the move: a view of such a table is not given at once (the helper lists, which
   * costs less than a write refused again), only once the stream or a landed write moves it on.
   */
  readonly #tablesBehind = new Map<string, string[]>();
  /**
   * The CIDs of our own group commits, by account, the last {@link OWN_KEPT}: their writes are in the
   * views from the PDS's answer to the applyWrites, so the event stream need not check them again.
   */
  readonly #own = new Map<string, string[]>();
  /**
   * Parts of ref tables (by account, then CID) that checked stream commits delivered, the last
   * {@link PARTS_KEPT}: a writer writes a table's new parts in commits before the table, so when the
   * table arrives its parts are here, and are fetched only when absent.
   */
  readonly #parts = new Map<string, Map<string, FetchedPart>>();

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
    const head = this.#heads.get(did)?.commit;
    if (head !== undefined && this.#group().provenSince(commit, head)) this.#moveHead(did, commit, rev);
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
      this.#tablesBehind.delete(v.did);
    }
    for (const v of dropped) this.#log(`dropped the view of ${safeText(v.did)}/${safeText(v.repo)}: ${why}`);
  }

  /**
   * A write for `did` found the account moved on (a refused swap): its views are behind until the
   * stream delivers a commit.
   */
  markBehind(did: string): void {
    const head = this.#heads.get(did)?.commit;
    if (head !== undefined) this.#behind.set(did, head);
  }

  /** A write for `did` swapped on its ref table at `cid` and found it moved: that table is behind. */
  markTableBehind(did: string, cid: string): void {
    const kept = this.#tablesBehind.get(did) ?? [];
    if (!kept.includes(cid)) kept.push(cid);
    if (kept.length > TABLES_BEHIND_KEPT) kept.shift();
    this.#tablesBehind.set(did, kept);
  }

  /** Whether `table` of `did` is one a write found behind. */
  #tableBehind(did: string, table: { cid: string } | null): boolean {
    return table !== null && this.#tablesBehind.get(did)?.includes(table.cid) === true;
  }

  /** What a helper's push wrote, into the views at once; or its view found stale, dropped. */
  wrote(did: string, repo: string, change: WroteChange): void {
    if (change.invalidate === true) {
      const v = this.views.dropRepo(did, repo);
      if (v !== undefined) this.drop([v], 'a push found it stale');
    }
    for (const r of change.written ?? []) this.views.apply(did, r.key, r, r.rev ?? '');
    for (const key of change.deleted ?? []) this.views.apply(did, key, null, '');
    // The write was swapped on the commit the views were at, so with it applied they are complete at
    // the commit it made: the next push answers at once from there rather than waiting for the
    // stream to deliver it (its swap on the older commit would be refused). A head the stream moved
    // meanwhile is left as the stream set it. Only a swap the PDS checks rests on this.
    const { head } = change;
    if (head !== undefined && change.invalidate !== true && this.#heads.get(did)?.commit === head.from)
      this.#moveHead(did, head.to, head.rev);
    // Writes the head does not hold yet (a push that listed for itself, whose write proved no view):
    // the views hold them but are not the account at the head any more, and a push swapping on it
    // would be refused. They are behind until the stream delivers a commit, as after a refused swap.
    // Told by the revisions written (a deletion's is not told: a push through the group commit moved
    // the head to the commit of its deletions already, and one of many refs moved it to its last).
    const at = this.#heads.get(did);
    if (
      at !== undefined &&
      at.commit !== head?.to &&
      (change.written ?? []).some((r) => r.rev === undefined || at.rev === '' || at.rev < r.rev)
    )
      this.markBehind(did);
  }

  /** Sets the commit the views of `did` are complete at, unless one of a later revision is set. */
  #moveHead(did: string, commit: string, rev: string): void {
    const at = this.#heads.get(did)?.rev;
    if (at !== undefined && at !== '' && rev !== '' && at >= rev) return;
    this.#heads.set(did, { commit, rev });
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
        tables: (did, changes, rev, commit) => this.tables(did, changes, rev, commit),
        head: (did, commit, rev) => {
          if (views.follows(did)) this.#moveHead(did, commit, rev);
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
      // The one reader of a repository's refs: its ref table, verified, when it has one.
      const refs = await readRepoRefs(remote);
      const table = lastTableRead(remote);
      const team = lastTeamRead(remote);
      // A team whose maintainer could not be read is read cold, where the warning says whose.
      if (team !== undefined && team.unread.length > 0)
        throw new Error('the table of one of its maintainers could not be read');
      // A private repository's table is sealed, and the stream's cannot be applied: its helpers list.
      if (remote.isPrivate) throw new Error('a private repository, of which no view is kept');
      if (table?.raw !== undefined) {
        // A team: each maintainer's table is followed on their own PDS's stream (the view waits for it).
        for (const m of team?.members ?? [])
          view.members.set(m.did, {
            did: m.did,
            pds: m.remote.owner.pds,
            ready: false,
            table: null,
            rev: '',
          });
        const { cid, rev, commit, raw } = table;
        const meanwhile = views.finishTable(view, { cid, rev, commit, value: raw.value, parts: raw.parts });
        // The next request loads it again, with the maintainers named now.
        if (meanwhile !== undefined && (await this.#takeTable(view, meanwhile)) === 'reload')
          throw new Error('its maintainers changed while it was loaded');
        if (team !== undefined) await this.#loadMembers(view, remote);
        return;
      }
      // A table written while the records were listed: the listing is not what readers read.
      if (view.pendingTable !== undefined) throw new Error('its ref table was written while it was listed');
      // An empty listing says nothing of privacy: the repository record does.
      if (refs.length === 0) await remote.prepare();
      // A private repository's records are sealed, and the stream's cannot be applied: its helpers list.
      if (remote.isPrivate) throw new Error('a private repository, of which no view is kept');
      // The listing holds at least the base commit, maybe more: a later commit the stream delivers, or
      // our own on top of it, moves the head on; a write swapped on the base finds any commit between.
      if (!this.#heads.has(owner.did) && views.get(owner.did, name) === view)
        this.#moveHead(owner.did, base.cid, base.rev);
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
  async viewAt(
    owner: Identity,
    name: string,
  ): Promise<
    { refs: WireRef[]; commit?: string } | { table: WireTable; members?: WireMember[] } | undefined
  > {
    const stream = this.#streams.get(owner.pds);
    const view = this.views.get(owner.did, name);
    // A ref table's view answers at once: the push's write swaps on its CID, which proves it whole,
    // and a helper that writes nothing reads once before it exits (HelperState.checkView). A team's
    // view only while every maintainer's table is read and their stream live: the push's write
    // swaps on the pusher's own table, and it reads every other writer's after it (team-push.ts).
    // Not a table a write found behind: the helper lists instead.
    if (view?.table !== undefined) {
      if (stream?.live !== true || !view.ready || view.pds !== owner.pds) return undefined;
      if (this.#tableBehind(owner.did, view.table)) return undefined;
      if (view.members.size === 0) return { table: view.table };
      const members = [...view.members.values()];
      if (!members.every((m) => m.ready && this.#streams.get(m.pds)?.live === true)) return undefined;
      if (members.some((m) => this.#tableBehind(m.did, m.table))) return undefined;
      return { table: view.table, members: members.map((m) => ({ did: m.did, pds: m.pds, table: m.table })) };
    }
    const head = this.#heads.get(owner.did)?.commit;
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
    if (!view.ready || view.table !== undefined) return undefined;
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

  /**
   * Changes of ref tables and their parts in one checked stream commit of `did` (commit `commit`,
   * revision `rev`): parts are kept for the tables that name them; a table's view takes its new
   * value; a view of ref records whose repository now has a table, or a view of a table that was
   * deleted, is dropped (the next request reads cold). Throws when a table cannot be taken (its
   * records break a rule, a part cannot be had): the caller drops the account's views.
   */
  async tables(did: string, changes: TableRecordChange[], rev: string, commit: string): Promise<void> {
    for (const c of changes)
      if (c.collection === REFS_PART_COLLECTION && c.cid !== null && c.value !== null)
        this.#keepPart(did, { rkey: c.key, cid: c.cid, value: c.value });
    for (const c of changes) {
      if (c.collection !== REFS_COLLECTION) continue;
      for (const v of this.views.of(did)) {
        if (refTableKey(v.repo, did, did) !== c.key) continue;
        const change: TableChange = { cid: c.cid ?? '', value: c.value, rev, commit };
        if (!v.ready) {
          // The newest of what the stream and this agent's own writes delivered while it loads.
          if (v.pendingTable === undefined || v.pendingTable.rev < change.rev) v.pendingTable = change;
        } else if (v.table === undefined || c.value === null) {
          const gone = this.views.dropRepo(did, v.repo);
          if (gone !== undefined)
            this.drop(
              [gone],
              v.table === undefined
                ? 'its repository now keeps its refs in a ref table'
                : 'its ref table was deleted',
            );
        } else if ((await this.#takeTable(v, change)) === 'reload')
          this.#reload(v, 'its ref table names another set of maintainers');
      }
      // A maintainer's own table of a team repository some view holds.
      for (const v of this.views.memberOf(did)) {
        if (refTableKey(v.repo, v.did, did) !== c.key) continue;
        const m = v.members.get(did)!;
        const change: TableChange = { cid: c.cid ?? '', value: c.value, rev, commit };
        if (!m.ready) m.pending = change;
        else await this.#takeMember(v, did, change);
      }
    }
  }

  /**
   * Reads each maintainer's table of a team's view once their PDS's event stream is live (so that
   * every change after the read reaches the view), then applies what the stream delivered meanwhile.
   */
  async #loadMembers(view: RepoView, remote: RemoteRepo): Promise<void> {
    const members = [...view.members.values()];
    const streams = await Promise.all(
      [...new Set(members.map((m) => m.pds))].map((pds) => this.#follow(pds)),
    );
    for (const live of await Promise.all(streams.map((s) => s.whenLive())))
      if (!live) throw new Error("a maintainer's event stream did not go live");
    await Promise.all(
      members.map(async (m) => {
        const got = await readMemberTable(remote, m.did);
        if (this.views.get(view.did, view.repo) !== view || view.members.get(m.did) !== m) return;
        const read = got.read;
        m.table =
          read?.raw === undefined
            ? null
            : {
                cid: read.cid,
                rev: read.rev,
                commit: read.commit,
                value: read.raw.value,
                parts: read.raw.parts,
              };
        m.rev = read?.rev ?? '';
        m.ready = true;
        const meanwhile = m.pending;
        delete m.pending;
        if (meanwhile !== undefined) await this.#takeMember(view, m.did, meanwhile);
      }),
    );
  }

  /** Drops a view whose set of maintainers changed, and loads it again (their streams followed). */
  #reload(v: RepoView, why: string): void {
    const gone = this.views.dropRepo(v.did, v.repo);
    if (gone === undefined) return;
    this.drop([gone], why);
    this.load({ did: v.did, handle: undefined, pds: v.pds }, v.repo);
  }

  /**
   * Takes a maintainer's new table into a team's view when it is newer than what the view holds:
   * checked as every reader checks one (its `repo` naming exactly this repository, its parts against
   * their CIDs), which throws on a broken rule (the caller drops the views). Deleted: they hold none.
   */
  async #takeMember(v: RepoView, did: string, change: TableChange): Promise<void> {
    const m = v.members.get(did);
    if (m === undefined || change.rev <= m.rev) return;
    if (change.value === null) {
      m.table = null;
      m.rev = change.rev;
      return;
    }
    const label = `${safeText(did)}'s refs of ${safeText(v.did)}/${safeText(v.repo)}`;
    const stored = parseMemberRead(v.did, v.repo, label, change, []).stored;
    const parts: FetchedPart[] = [];
    for (const link of stored.parts) {
      const had =
        m.table?.parts.find((p) => p.cid === link.cid && p.rkey === link.rkey) ??
        this.#parts.get(did)?.get(link.cid);
      parts.push(
        had?.rkey === link.rkey ? had : await this.#fetchPart({ did, pds: m.pds, repo: v.repo }, link.rkey),
      );
    }
    parseMemberRead(v.did, v.repo, label, change, parts);
    // Dropped, replaced, removed, or moved on while parts were fetched: a newer value is not undone.
    if (this.views.get(v.did, v.repo) !== v || v.members.get(did) !== m || change.rev <= m.rev) return;
    m.table = { cid: change.cid, rev: change.rev, commit: change.commit, value: change.value, parts };
    m.rev = change.rev;
  }

  /**
   * A table write of the agent's own landed (table-group.ts): the view takes it at once, so that the
   * next push swaps on it; the stream need not check that commit again. A table it cannot take drops
   * the view.
   */
  async tableLanded(did: string, rkey: string, change: TableChange): Promise<void> {
    const kept = this.#own.get(did) ?? [];
    kept.push(change.commit);
    if (kept.length > OWN_KEPT) kept.shift();
    this.#own.set(did, kept);
    for (const v of this.views.of(did)) {
      if (refTableKey(v.repo, did, did) !== rkey) continue;
      // A view still loading takes the write as it takes one its stream delivers meanwhile: its
      // listing may have read the table before the write, and the stream may deliver the write only
      // after the next push asked for the view, which would then swap on the older table.
      if (!v.ready) {
        if (v.pendingTable === undefined || v.pendingTable.rev < change.rev) v.pendingTable = change;
        continue;
      }
      if (v.table === undefined) continue;
      try {
        if ((await this.#takeTable(v, change)) === 'reload')
          this.#reload(v, 'its ref table names another set of maintainers');
      } catch (err) {
        const gone = this.views.dropRepo(did, v.repo);
        if (gone !== undefined)
          this.drop([gone], `its own table write could not be taken (${safeText(String(err))})`);
      }
    }
    // A maintainer's own table of a team repository (the write of a maintainer's push).
    for (const v of this.views.memberOf(did)) {
      if (v.members.get(did)?.ready !== true || refTableKey(v.repo, v.did, did) !== rkey) continue;
      try {
        await this.#takeMember(v, did, change);
      } catch (err) {
        const gone = this.views.dropRepo(v.did, v.repo);
        if (gone !== undefined)
          this.drop([gone], `its maintainer's table write could not be taken (${safeText(String(err))})`);
      }
    }
  }

  /** The table a ready view of `did` whose table has key `rkey` holds, if any. */
  tableOf(did: string, rkey: string): WireTable | undefined {
    for (const v of this.views.of(did))
      if (v.ready && v.table !== undefined && refTableKey(v.repo, did, did) === rkey) return v.table;
    return undefined;
  }

  /**
   * Takes a table's new value into its view when it is newer than what the view holds: its parts
   * from the view, the parts the stream delivered, or fetched (verified) when absent; then checked as
   * every reader checks a table (records/read-refs.ts parseTableRead), which throws on a broken rule.
   * A table that removes maintainers takes their tables out of the view (their writes count for
   * nothing from now on); one that names a maintainer the view does not follow yet is not taken:
   * 'reload', and the caller loads the view again with that maintainer's table and stream.
   */
  async #takeTable(v: RepoView, change: TableChange): Promise<'reload' | undefined> {
    const label = `${safeText(v.did)}/${safeText(v.repo)}`;
    if (change.value === null) throw new Error('its ref table was deleted');
    if (v.table !== undefined && change.rev <= v.table.rev) return undefined;
    const stored = parseStoredTable(v.did, v.repo, label, change.value);
    const named = new Set(maintainersOf(stored, v.did));
    if ([...named].some((did) => !v.members.has(did))) return 'reload';
    const parts: FetchedPart[] = [];
    for (const link of stored.parts) {
      const had =
        v.table?.parts.find((p) => p.cid === link.cid && p.rkey === link.rkey) ??
        this.#parts.get(v.did)?.get(link.cid);
      parts.push(had?.rkey === link.rkey ? had : await this.#fetchPart(v, link.rkey));
    }
    parseTableRead(v.did, v.repo, label, change, parts, stored);
    // Dropped, replaced, or moved on while parts were fetched: a newer value is not undone.
    if (this.views.get(v.did, v.repo) !== v || v.table === undefined || change.rev <= v.table.rev)
      return undefined;
    v.table = { cid: change.cid, rev: change.rev, commit: change.commit, value: change.value, parts };
    // Removed maintainers: their tables are no longer read, by the agent as by every reader.
    for (const did of [...v.members.keys()]) if (!named.has(did)) v.members.delete(did);
    return undefined;
  }

  /** One part of a table (the owner's or a maintainer's), read with its proof in `v.did`'s account (its CID is checked against the table's). */
  async #fetchPart(v: { did: string; pds: string; repo: string }, rkey: string): Promise<FetchedPart> {
    const remote = this.#ctx.remoteRepo({ did: v.did, handle: undefined, pds: v.pds }, v.repo, this.#log);
    const verify = remote.verifier;
    if (verify === undefined) throw new Error('no verified reads to fetch a part of its ref table');
    const reads = await openVerifiedReads(remote, verify);
    const got = await reads.read(REFS_PART_COLLECTION, rkey);
    reads.save();
    if (!got.found) throw new Error(`part ${safeText(rkey)} of its ref table is missing`);
    const part = { rkey, cid: got.cid, value: got.value };
    this.#keepPart(v.did, part);
    return part;
  }

  #keepPart(did: string, part: FetchedPart): void {
    let kept = this.#parts.get(did);
    if (kept === undefined) this.#parts.set(did, (kept = new Map<string, FetchedPart>()));
    kept.set(part.cid, part);
    if (kept.size > PARTS_KEPT) kept.delete(kept.keys().next().value!);
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
