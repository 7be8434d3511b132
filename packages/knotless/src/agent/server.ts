import http from 'node:http';
import type { Config } from 'knotless-core/config/env';
import { currentCaller, forThisProcess } from 'knotless-core/caller/scope';
import { isKnotlessError, KnotlessError } from 'knotless-core/errors';
import type { Identity } from 'knotless-core/identity/resolver';
import { parseRefRecord } from 'knotless-core/records/ref-record';
import type { RemoteRepo } from 'knotless-core/records/remote-repo';
import type { XrpcClient } from 'knotless-core/xrpc/client';
import type { HttpRequest, HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import { safeText } from 'knotless-core/text/terminal';
import type { AgentHost, WroteChange } from './client.ts';
import { GroupCommit, budgetKey, refusalOf } from './group-commit.ts';
import { RateBudgets } from 'knotless-core/xrpc/rate-limit';
import { hostHelper } from './helper-host.ts';
import { AgentLife, type LifeOptions } from './lifecycle.ts';
import { answerForward, isWrite, readBody } from './socket-forward.ts';
import { PdsStream } from './stream.ts';
import { Views, parseWireRefs, writeWireRefs, type WireRef } from './views.ts';

/**
 * How long a helper's question waits for the event stream to deliver the account's latest commit.
 * The reference PDS emits a commit at most about a second after it is written (its sequencer polls).
 */
const CATCH_UP_MS = 3000;

/** How many of its own latest group commits per account the agent knows by CID (see `own`). */
const OWN_KEPT = 64;

/**
 * What the agent is handed by `knotless agent` (a `Context` is one): the configuration, the direct
 * transport, and clients and ref-record readers made over it.
 */
export interface AgentServices {
  readonly config: Config;
  readonly transport: Transport;
  client(service: string): XrpcClient;
  remoteRepo(owner: Identity, name: string, warn: (message: string) => void): RemoteRepo;
  /** The identity cache on disk, which every knotless process of this cache directory reads. */
  readonly resolver: { readonly cache: { forget(didOrHandle: string): void } };
}

/** A running agent. */
export interface Agent {
  socket: string;
  /** Lists a repository now, so that the next push to it finds its view ready. */
  warm(owner: Identity, name: string): void;
  /** Stops accepting, answers what is in flight, stops following; then `exit` is called. */
  stop(why: string): void;
}

/** The account a forwarded write was for (its body's `repo`), if it says. */
function writeTarget(body: Buffer): string | undefined {
  try {
    const repo = (JSON.parse(body.toString('utf8')) as { repo?: unknown }).repo;
    return typeof repo === 'string' ? repo : undefined;
  } catch (err) {
    // Not JSON: not a write of ours; nothing to drop.
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/**
 * The warm agent: a local process that keeps connections to PDSes open for the helpers that talk to
 * it over a Unix socket, and keeps exact views of the repositories they push to by following each
 * account's event stream. A view answers git's `list for-push` only once the stream has delivered
 * the account's latest revision; anything the agent cannot apply drops the view, and the helper lists.
 */
export async function startAgent(
  ctx: AgentServices,
  socket: string,
  log: (line: string) => void,
  life: LifeOptions,
): Promise<Agent | undefined> {
  const views = new Views();
  const streams = new Map<string, PdsStream>();
  const loading = new Map<string, Promise<void>>();
  /**
   * Per account, the commit its views are complete at: read before the first listing, then each
   * commit the event stream delivers, or one of ours that came right after it. A helper's listing
   * from a view carries it, and its write's `swapCommit` proves the listing (see RemoteRepo.viewProof).
   */
  const heads = new Map<string, string>();
  /**
   * Accounts a write found moved past the commit their views were at (a swap refused): the stream
   * has not delivered that move yet. Until it delivers a commit, helpers are answered only once the
   * view is shown current (a read), not at once with a commit already known to be behind. The view
   * itself stays: the stream brings it up to date, in order, and nothing was written.
   */
  const behind = new Map<string, string>();
  // The write budget of each account, from the RateLimit headers of every answer to a write.
  const budgets = new RateBudgets();
  const group = new GroupCommit(
    ctx.transport,
    log,
    (did, rev, writes, commit) => {
      remember(did, commit);
      const head = heads.get(did);
      if (head !== undefined && group.provenSince(commit, head)) heads.set(did, commit);
      try {
        for (const w of writes) {
          const ref =
            w.cid === null ? null : { key: w.rkey, cid: w.cid, rev, record: parseRefRecord(w.record) };
          views.apply(did, w.rkey, ref, rev);
        }
      } catch (err) {
        // A record the views cannot read (no helper of ours writes one): they cannot follow this account.
        if (!isKnotlessError(err)) throw err;
        drop(views.drop({ did }), 'a group commit wrote a record it cannot read');
      }
    },
    budgets,
  );
  /**
   * The CIDs of our own group commits, by account, the last {@link OWN_KEPT}: their writes are in the
   * views from the PDS's answer to the applyWrites, so the event stream need not check them again.
   */
  const own = new Map<string, string[]>();
  const remember = (did: string, commit: string): void => {
    const kept = own.get(did) ?? [];
    kept.push(commit);
    if (kept.length > OWN_KEPT) kept.shift();
    own.set(did, kept);
  };
  const drop = (dropped: { repo: string; did: string }[], why: string): void => {
    for (const v of dropped) {
      if (views.follows(v.did)) continue;
      heads.delete(v.did);
      behind.delete(v.did);
    }
    for (const v of dropped) log(`dropped the view of ${safeText(v.did)}/${safeText(v.repo)}: ${why}`);
  };

  async function follow(pds: string): Promise<PdsStream> {
    const running = streams.get(pds);
    if (running !== undefined && !running.dead) return running;
    const stream = new PdsStream(
      pds,
      {
        follows: (did) => views.follows(did),
        followed: () => views.dids(),
        ours: (did, commit) => own.get(did)?.includes(commit) === true,
        apply: (did, changes, rev) => {
          for (const c of changes) views.apply(did, c.key, c.ref, rev);
        },
        head: (did, commit) => {
          if (views.follows(did)) heads.set(did, commit);
        },
        drop: (did, why) => drop(views.drop(did === undefined ? { pds } : { did }), why),
        // A new handle, a move, a status change: the next command of any shell resolves it afresh,
        // so an old handle names nothing from now on rather than after the cache's time to live.
        identityChanged: (did) => ctx.resolver.cache.forget(did),
      },
      log,
    );
    streams.set(pds, stream);
    const [{ IdResolver, MemoryCache }, { fetchOver }] = await Promise.all([
      import('./stream-libs.ts'),
      import('knotless-core/xrpc/transport'),
    ]);
    // Keys cached: @atproto/sync refreshes a cached key by itself when a commit's signature fails.
    const idResolver = new IdResolver({
      plcUrl: ctx.config.plcUrl,
      fetch: fetchOver(ctx.transport),
      didCache: new MemoryCache(),
    });
    void stream.run(idResolver).finally(() => {
      if (streams.get(pds) === stream) streams.delete(pds);
    });
    log(`following ${safeText(pds)}`);
    return stream;
  }

  /** The account's latest commit and revision, as its PDS says now. */
  async function latest(owner: Identity): Promise<{ cid: string; rev: string }> {
    const res = await ctx
      .client(owner.pds)
      .query<{ cid?: unknown; rev?: unknown }>('com.atproto.sync.getLatestCommit', { did: owner.did });
    if (typeof res.rev !== 'string' || typeof res.cid !== 'string')
      throw new Error('getLatestCommit answered without a commit and revision');
    return { cid: res.cid, rev: res.rev };
  }
  const latestRev = async (owner: Identity): Promise<string> => (await latest(owner)).rev;

  /**
   * Starts a view: once the account's stream is demonstrably live, reads the latest revision, then
   * lists; changes the stream delivers from the start on are applied over the listing.
   */
  function load(owner: Identity, name: string): void {
    const k = Views.key(owner.did, name);
    if (loading.has(k)) return;
    const p = (async () => {
      const stream = await follow(owner.pds);
      if (!(await stream.whenLive())) return;
      const view = views.begin(owner.did, name, owner.pds);
      const base = await latest(owner);
      const remote = ctx.remoteRepo(owner, name, log);
      const refs = await remote.listRefs();
      // An empty listing says nothing of privacy: the repository record does.
      if (refs.length === 0) await remote.prepare();
      // A private repository's records are sealed, and the stream's cannot be applied: its helpers list.
      if (remote.isPrivate) throw new Error('a private repository, of which no view is kept');
      // The listing holds at least the base commit, maybe more: a later commit the stream delivers, or
      // our own on top of it, moves the head on; a write swapped on the base finds any commit between.
      if (!heads.has(owner.did) && views.get(owner.did, name) === view) heads.set(owner.did, base.cid);
      views.finish(view, refs, base.rev);
    })()
      .catch((err: unknown) => {
        drop(views.dropRepo(owner.did, name) ? [{ did: owner.did, repo: name }] : [], 'its listing failed');
        log(`listing ${safeText(owner.did)}/${safeText(name)}: ${safeText(String(err))}`);
      })
      .finally(() => loading.delete(k));
    loading.set(k, p);
  }

  /**
   * The view of a repository, at once, with the commit it is complete at: a helper's write proves it
   * with `swapCommit` (and reads once before exiting when nothing did). Without a known commit, the
   * view only once it is shown current (a read of the latest revision).
   */
  async function viewAt(
    owner: Identity,
    name: string,
  ): Promise<{ refs: WireRef[]; commit?: string } | undefined> {
    const stream = streams.get(owner.pds);
    const view = views.get(owner.did, name);
    const head = heads.get(owner.did);
    const atOnce = head !== undefined && behind.get(owner.did) !== head;
    if (stream?.live === true && view?.ready === true && view.pds === owner.pds && atOnce)
      return { refs: writeWireRefs([...view.refs.values()]), commit: head };
    const refs = await currentView(owner, name);
    return refs === undefined ? undefined : { refs };
  }

  /** The view of a repository when it is current now, else undefined (and a load is started). */
  async function currentView(owner: Identity, name: string): Promise<WireRef[] | undefined> {
    const stream = streams.get(owner.pds);
    const view = views.get(owner.did, name);
    if (stream === undefined || !stream.live || view === undefined || view.pds !== owner.pds) {
      if (view === undefined || view.pds !== owner.pds) load(owner, name);
      return undefined;
    }
    if (!view.ready) return undefined;
    let latest: string;
    try {
      latest = await latestRev(owner);
    } catch (err) {
      log(`reading the latest revision of ${safeText(owner.did)}: ${safeText(String(err))}`);
      return undefined;
    }
    const seen = stream.seen(owner.did);
    const caughtUp =
      view.baseRev >= latest ||
      seen >= latest ||
      group.caughtUp(owner.did, latest, seen > view.baseRev ? seen : view.baseRev) ||
      (await stream.waitForRev(owner.did, latest, CATCH_UP_MS));
    // Dropped or replaced while we waited: the helper lists.
    if (!caughtUp || views.get(owner.did, name) !== view || !view.ready) return undefined;
    return writeWireRefs([...view.refs.values()]);
  }

  /**
   * A helper's request, sent on: a ref write into the account's next group commit, anything else as
   * it came. The views follow what it found: a write that failed (it may have landed) or was refused
   * for anything but a swap or a rate limit drops them; a refused swap marks the account behind.
   */
  async function forward(target: URL, init: HttpRequest): Promise<HttpResponse> {
    // A helper hosted here hands its body as it built it (JSON text), one over the socket as bytes.
    const { body } = init;
    const bytes =
      typeof body === 'string'
        ? Buffer.from(body, 'utf8')
        : body instanceof Uint8Array
          ? Buffer.from(body.buffer, body.byteOffset, body.byteLength)
          : undefined;
    const did = bytes !== undefined && isWrite(target.pathname) ? writeTarget(bytes) : undefined;
    let out: HttpResponse;
    try {
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(init.headers)) headers[k.toLowerCase()] = v;
      const grouped =
        init.method === 'POST' && bytes !== undefined
          ? group.accept(target, headers, bytes, init.deadlineMs)
          : undefined;
      out = await (grouped ??
        ctx.transport.request(target, bytes?.length === 0 ? { ...init, body: null } : init));
    } catch (err) {
      // Whether it landed is unknown: the views of that account cannot be trusted any more.
      if (did !== undefined) drop(views.drop({ did }), 'a write through the agent failed');
      throw err;
    }
    if (did !== undefined) budgets.observe(budgetKey(target, did), out.headers);
    // A refused swap wrote nothing, and says only that the account moved on: the views follow
    // it as the stream delivers it. Any other refusal is not understood here, so they go.
    const refused = out.status >= 400 ? refusalOf(out) : undefined;
    if (refused === 'swap-conflict') {
      const head = did === undefined ? undefined : heads.get(did);
      if (did !== undefined && head !== undefined) behind.set(did, head);
    } else if (out.status >= 400 && did !== undefined && refused !== 'rate-limited')
      // A rate limit refuses before anything is done (xrpc/rate-limit.ts): nothing moved, the views hold.
      drop(views.drop({ did }), `a write through the agent was refused (${out.status})`);
    return out;
  }

  /** What a helper's push wrote, into the views at once; or its view found stale, dropped. */
  function wrote(did: string, repo: string, change: WroteChange): void {
    if (change.invalidate === true) {
      const v = views.dropRepo(did, repo);
      if (v !== undefined) drop([v], 'a push found it stale');
    }
    for (const r of change.written ?? []) views.apply(did, r.key, r, r.rev ?? '');
    for (const key of change.deleted ?? []) views.apply(did, key, null, '');
  }

  /**
   * The agent as the helpers it hosts reach it: calls, with the helper's own copies of refs. Each runs
   * as the agent's own work, outside the calling helper's (a stream it starts, a group commit it
   * joins, a line it logs serve every caller; see forThisProcess).
   */
  const host: AgentHost = {
    forward: (url, init) => {
      // git went away: a request nobody will hear the outcome of is not sent, above all a write.
      if (currentCaller()?.gone?.() === true)
        return Promise.reject(
          new KnotlessError('cancelled', 'git went away before the helper was done; nothing more was sent.'),
        );
      // Its own answer: a group commit hands one answer (a 5xx, a 429) to each helper it refused.
      return forThisProcess(() => forward(url, init)).then((res) => ({
        status: res.status,
        headers: { ...res.headers },
        body: Buffer.from(res.body),
      }));
    },
    view: (did, repo, pds) =>
      forThisProcess(async () => {
        const got = await viewAt({ did, handle: undefined, pds }, repo);
        if (got === undefined) return undefined;
        const refs = parseWireRefs(got.refs);
        return got.commit === undefined ? { refs } : { refs, commit: got.commit };
      }),
    // Applied before the call returns; a fault of the views rejects, as the socket's 502 would.
    wrote: (did, repo, change) =>
      forThisProcess(
        () =>
          new Promise<void>((resolve) =>
            resolve(
              wrote(did, repo, { ...change, written: parseWireRefs(writeWireRefs(change.written ?? [])) }),
            ),
          ),
      ),
  };

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://agent');
    if (url.pathname === '/forward') {
      await answerForward(req, res, forward);
      return;
    }
    if (url.pathname === '/helper' && req.method === 'POST') {
      await hostHelper(req, res, log, host);
      return;
    }
    if (url.pathname === '/view') {
      const owner: Identity = {
        did: url.searchParams.get('did')!,
        handle: undefined,
        pds: url.searchParams.get('pds')!,
      };
      const name = url.searchParams.get('repo')!;
      // The first helper to ask lists for itself; the view is ready for later ones.
      const got = await viewAt(owner, name);
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(got === undefined ? { confirmed: false } : { confirmed: true, ...got }));
      return;
    }
    if (url.pathname === '/wrote' && req.method === 'POST') {
      const body = JSON.parse((await readBody(req)).toString('utf8')) as {
        did: string;
        repo: string;
        invalidate?: boolean;
        written?: WireRef[];
        deleted?: Array<{ key: string; rev: string }>;
      };
      wrote(body.did, body.repo, {
        invalidate: body.invalidate === true,
        written: parseWireRefs(body.written ?? []),
        deleted: (body.deleted ?? []).map((d) => d.key),
      });
      res.writeHead(204).end();
      return;
    }
    if (url.pathname === '/writes') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(group.pending()));
      return;
    }
    if (url.pathname === '/health') {
      res.writeHead(200).end('ok');
      return;
    }
    res.writeHead(404).end();
  }

  const lifecycle = new AgentLife(socket, log, {
    ...life,
    exit: (why) => {
      for (const [pds, s] of streams) {
        log(`${safeText(pds)}: ${s.frames} frames read, ${s.decoded} decoded`);
        log(
          `${safeText(pds)}: ${s.checked} commits checked, ${s.ours} of our own group commits taken as written`,
        );
        s.stop();
      }
      life.exit(why);
    },
  });
  const server = http.createServer((req, res) => {
    if (lifecycle.answer(req, res)) return;
    handle(req, res).catch((err: unknown) => {
      log(`request failed: ${String(err)}`);
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: 'AgentForwardFailed',
          message: err instanceof Error ? err.message : String(err),
        }),
      );
    });
  });
  server.keepAliveTimeout = 60_000;
  // A thin helper's session (helper-host.ts) is one request whose body is git's commands: it lasts
  // as long as git's command, past Node's default of five minutes for receiving a request.
  server.requestTimeout = 0;
  // Another agent already answers at this socket: it serves, this one is not needed.
  if (!(await lifecycle.bind(server))) return undefined;
  return { socket, warm: load, stop: (why) => lifecycle.stop(why) };
}
