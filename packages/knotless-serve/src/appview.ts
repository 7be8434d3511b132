import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { XrpcClient, safeText } from 'knotless-core';
import { makeSignIn, type SignIn } from './auth/oauth.ts';
import { loadServerKey } from './auth/server-key.ts';
import { WebSessions } from './auth/web-sessions.ts';
import type { ServeConfig } from './config.ts';
import { Index } from './db/index-store.ts';
import { Notifications } from './db/notifications.ts';
import { openDatabase } from './db/open.ts';
import { backfillAccount, listPdsAccounts } from './ingest/backfill.ts';
import { follow, type Subscription } from './ingest/firehose.ts';
import { Identities } from './ingest/identities.ts';
import { guardedFetch, guardedTransport } from './mirror/guard.ts';
import { Mirror } from './mirror/mirror.ts';
import { ImageProxy, imageKey } from './web/images.ts';
import { handleRequest } from './web/server.ts';
import type { Site } from './web/site.ts';

/** A running appview. */
export interface Appview {
  /** Where it listens, e.g. http://127.0.0.1:2583. */
  url: string;
  index: Index;
  mirror: Mirror;
  /** Settles when every mirror sync asked for so far has finished. */
  idle(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the appview: opens (and migrates) the index, listens for HTTP, follows the event streams
 * from their saved cursors, then backfills the accounts it was given and catches mirrors up.
 */
export async function startAppview(
  config: ServeConfig,
  write: (line: string) => void = (l) => process.stderr.write(`knotless-serve: ${l}\n`),
): Promise<Appview> {
  // Log lines carry network text (handles, repository names, PDS errors, request paths): one escape
  // here covers every line, whoever wrote it.
  const log = (line: string): void => write(safeText(line, 2000));
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
    log(`sign-in is off: ${String(err)}`);
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
    dev: config.dev,
    secure: publicUrl.startsWith('https://'),
  };

  server.on('request', (req, res) => handleRequest(site, req, res));

  const hooks = { changed: (did: string, repo: string) => void mirror.schedule(did, repo), log };
  const subs: Subscription[] = [];
  for (const service of config.firehoses) subs.push(await follow(service, index, identities, hooks));

  // Backfill in the background: the streams already run, and rows carry revisions, so order is free.
  const backfill = (async () => {
    const dids = new Set(config.backfillDids);
    for (const pds of config.backfillPdses) {
      try {
        for (const did of await listPdsAccounts(pds, transport)) dids.add(did);
      } catch (err) {
        log(`listing accounts of ${pds}: ${String(err)}`);
      }
    }
    for (const did of dids) {
      try {
        for (const repo of await backfillAccount(did, index, identities, transport, log))
          void mirror.schedule(did, repo);
      } catch (err) {
        log(`backfilling ${did}: ${String(err)}`);
      }
    }
    // Mirrors may lag the index after a crash: bring every one up to date once.
    for (const r of await index.reposWithRefs()) void mirror.schedule(r.did, r.repo);
  })().catch((err: unknown) => {
    // Each account's failure is logged above; this is anything else (the index failing, a fault of
    // ours). It is logged, not rethrown: the appview keeps serving what it has, and shutdown goes on.
    log(`backfill stopped: ${String(err)}`);
  });

  return {
    url,
    index,
    mirror,
    async idle() {
      await backfill;
      await mirror.idle();
    },
    async close() {
      await Promise.all(subs.map((s) => s.stop()));
      await backfill;
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
