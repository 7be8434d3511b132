import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { XrpcClient } from 'knotless-core';
import { parseAtUri } from 'knotless-core/forge/records';
import { storedRound } from 'knotless-core/forge/kinds/pull';
import { makeSignIn, type SignIn } from './auth/oauth.ts';
import { loadServerKey } from './auth/server-key.ts';
import { WebSessions } from './auth/web-sessions.ts';
import type { ServeConfig } from './config.ts';
import { jsonLog, textLog } from './log.ts';
import { Index } from './db/index-store.ts';
import { Notifications } from './db/notifications.ts';
import { startLeadership, type Leadership } from './db/leader.ts';
import { openDatabase } from './db/open.ts';
import { follow, type StreamHooks, type Subscription } from './ingest/firehose.ts';
import { Identities } from './ingest/identities.ts';
import { Resync } from './ingest/resync.ts';
import { guardedFetch, guardedTransport } from './net/guard.ts';
import { Mirror } from './mirror/mirror.ts';
import { ImageProxy, imageKey } from './web/images.ts';
import { handleRequest } from './web/server.ts';
import type { Site } from './web/site.ts';
import { Deliverer, commitsOf } from './webhooks/deliver.ts';

/** A running appview. */
export interface Appview {
  /** Where it listens, e.g. http://127.0.0.1:2583. */
  url: string;
  index: Index;
  mirror: Mirror;
  /** Reads accounts whole; its counts tell how often. */
  resync: Resync;
  /** Posts the webhooks' queued deliveries. */
  webhooks: Deliverer;
  /** Settles when every mirror sync asked for so far has finished. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the appview: opens (and migrates) the index, listens for HTTP, follows the event streams
 * from their saved cursors, then backfills the accounts it was given and catches mirrors up.
 */
export async function startAppview(config: ServeConfig, write?: (line: string) => void): Promise<Appview> {
  // JSON lines for an operator's log pipeline; text for a caller that takes the lines itself.
  const log = write === undefined ? jsonLog(config.logLevel) : textLog(config.logLevel, write);
  const { db, engine } = await openDatabase(config.database, log);
  const index = new Index(db, engine);
  const identities = await Identities.create(
    index,
    config.dev,
    config.plcUrl,
    { totalMs: config.fetchTimeoutMs, idleMs: config.fetchIdleMs },
    log,
  );
  const mirror = new Mirror(config, index, identities, log);
  // Node's own limit on receiving a request, kept in line with ours (it defaults to five minutes).
  const server = http.createServer({
    requestTimeout: Math.max(config.requestTimeoutMs, config.gitTimeoutMs),
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  const images = new ImageProxy({
    key: imageKey(config.dataDir),
    dev: config.dev,
    maxBytes: config.imageMaxBytes,
    timeoutMs: config.imageTimeoutMs,
    log,
  });
  const transport = guardedTransport(config.dev, {
    totalMs: config.fetchTimeoutMs,
    idleMs: config.fetchIdleMs,
  });
  const publicUrl = (config.publicUrl ?? url).replace(/\/+$/, '');
  const key = loadServerKey(config.oauthKeyFile, config.dataDir, config.dev);
  let signIn: SignIn | undefined;
  try {
    signIn =
      key === undefined
        ? undefined
        : await makeSignIn({
            publicUrl,
            key,
            index,
            identities,
            fetch: guardedFetch(config.dev, { totalMs: config.fetchTimeoutMs, idleMs: config.fetchIdleMs }),
            dev: config.dev,
          });
  } catch (err) {
    // An operator who configured a key asked for sign-in: starting without it would hide that.
    // The dev network's own key only offers it, where the address allows.
    if (config.oauthKeyFile !== undefined) throw err;
    log.warn(`sign-in is off: ${String(err)}`);
  }
  const site: Site = {
    index,
    mirror,
    publicUrl,
    log,
    requestTimeoutMs: config.requestTimeoutMs,
    gitTimeoutMs: config.gitTimeoutMs,
    images,
    signIn,
    sessions: new WebSessions(db),
    notifications: new Notifications(db),
    identities,
    forge: {
      client: (service, authorizer) =>
        new XrpcClient(service, { transport, ...(authorizer === undefined ? {} : { authorizer }) }),
      config: { cacheDir: path.join(config.dataDir, 'forge-cache'), maxObjectBytes: config.maxPackBytes },
    },
    transport,
    plcUrl: config.plcUrl,
    dev: config.dev,
    secure: publicUrl.startsWith('https://'),
  };

  // Every process delivers; the queue's leases keep two from posting the same delivery.
  const webhooks = new Deliverer(index.webhooks, {
    dev: config.dev,
    timeoutMs: config.webhookTimeoutMs,
    retryMs: config.webhookRetryMs,
    concurrency: config.webhookConcurrency,
    // A push's commits are read from the mirror once its sync for the push has ended (a sync
    // always ends: each of its PDS requests has its time limit); a mirror that failed lists none.
    commits: async (did, repo, before, after) => {
      await mirror.schedule(did, repo, true);
      return commitsOf(mirror.gitDir(did, repo), before, after);
    },
    log: (line) => log.warn(line),
  });
  site.webhooks = webhooks;
  webhooks.start();

  server.on('request', (req, res) => handleRequest(site, req, res));

  // Accounts are read whole at start, after a stream lost events, and one by one when asked.
  const leader: { current?: Leadership } = {};
  // `urgent`: a push seen on a stream goes ahead of the mirrors a re-read of accounts catches up.
  const changed = (did: string, repo: string, urgent = false): void => {
    // A push indexed just now has queued its webhooks' deliveries.
    webhooks.wake();
    void mirror.schedule(did, repo, urgent);
    leader.current?.announce(did, repo);
  };
  const resync = new Resync(
    { dids: config.backfillDids, pdses: config.backfillPdses },
    index,
    identities,
    transport,
    changed,
    log,
    config.gapResyncMs,
  );
  const hooks: StreamHooks = {
    changed: (did, repo) => changed(did, repo, true),
    pulled: (did, record) => {
      const round = record.rounds.at(-1);
      const repo = parseAtUri(record.repo);
      if (round !== undefined && repo !== undefined)
        mirror.prefetchRound(did, repo.did, repo.rkey, storedRound(round));
    },
    gap: (service, reason) => {
      log.warn(`${service} lost events (${reason}): reading every account again`);
      resync.gap({ relays: config.relays.filter((r) => relayStream(r) === service), known: true });
    },
    recheck: (did) => resync.recheck(did),
    log,
  };
  /** Follows the streams and reads accounts; returns how to stop. One process of a cluster does. */
  const ingest = async (): Promise<() => Promise<void>> => {
    // A relay is searched at start only when its stream has no saved position: a restart picks up
    // where it stopped, and the relay says so when it no longer holds that position (a gap, above).
    const fresh: string[] = [];
    for (const r of config.relays) if ((await index.cursor(relayStream(r))) === undefined) fresh.push(r);
    const subs: Subscription[] = [];
    const streams = [...config.firehoses, ...config.relays.map(relayStream)];
    for (const service of streams) subs.push(await follow(service, index, identities, hooks));
    // The streams already run, so nothing written from here on is missed while accounts are read.
    resync.full({ relays: fresh, known: false });
    // A stream can lose events without saying so (a relay that dropped them, a bug of ours): every
    // so often each known account is read again, and the relays asked again for accounts with
    // knotless records (one whose every event was lost is known to no table), so the index
    // converges on what the PDSes hold.
    const recheck =
      config.recheckMs > 0
        ? setInterval(() => resync.full({ relays: config.relays, known: true }), config.recheckMs)
        : undefined;
    recheck?.unref();
    return async () => {
      clearInterval(recheck);
      await Promise.all(subs.map((s) => s.stop()));
      resync.stop();
      await resync.idle();
    };
  };
  let stopIngest: (() => Promise<void>) | undefined;
  if (engine === 'postgres') {
    // Any number of processes on one PostgreSQL index: one ingests, all serve (db/leader.ts).
    leader.current = await startLeadership(config.database, {
      lead: ingest,
      changed: (did, repo) => void mirror.schedule(did, repo, true),
      log,
    });
    // Every process keeps its own mirrors: bring them up to what the index holds.
    if (!leader.current.leading)
      for (const r of await index.reposWithRefs()) void mirror.schedule(r.did, r.repo);
  } else {
    stopIngest = await ingest();
  }

  return {
    url,
    index,
    mirror,
    resync,
    webhooks,
    async idle() {
      await resync.idle();
      await mirror.idle();
    },
    async close() {
      await leader.current?.close();
      await stopIngest?.();
      await webhooks.close();
      await resync.idle();
      await mirror.idle();
      mirror.close();
      transport.close();
      images.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await index.close();
    },
  };
}

/** A relay's event stream, from its XRPC base (http(s):// as given to --relay, or ws(s)://). */
export function relayStream(relay: string): string {
  return relay.replace(/^http/, 'ws').replace(/\/+$/, '');
}
