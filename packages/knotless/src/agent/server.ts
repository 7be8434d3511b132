import fs from 'node:fs';
import http from 'node:http';
import type { Context } from '../context.ts';
import type { Identity } from '../identity/resolver.ts';
import { REF_COLLECTION } from '../repo/collections.ts';
import { parseRefRecord } from '../remote/ref-record.ts';
import { RemoteRepo } from '../remote/remote-repo.ts';
import { Views, parseWireRefs, writeWireRefs, type WireRef } from './views.ts';

/** How long a new event stream gets to connect before listings made after it count as current. */
const STREAM_SETTLE_MS = 1000;

/** A running agent. */
export interface Agent {
  socket: string;
  close(): Promise<void>;
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * The warm agent: a local process that keeps connections to PDSes open for the helpers that talk to
 * it over a Unix socket, and keeps views of the repositories they use current by following each
 * account's event stream, so that a push needs neither a new connection nor a listing.
 */
export async function startAgent(ctx: Context, socket: string, log: (line: string) => void): Promise<Agent> {
  const views = new Views();
  const streams = new Map<string, { stop(): Promise<void>; since: number }>();
  const loading = new Map<string, Promise<void>>();

  async function follow(owner: Identity): Promise<number> {
    const running = streams.get(owner.pds);
    if (running !== undefined) return running.since;
    const [{ Firehose }, { IdResolver }] = await Promise.all([
      import('@atproto/sync'),
      import('@atproto/identity'),
    ]);
    const { fetchOver } = await import('../xrpc/transport.ts');
    const idResolver = new IdResolver({ plcUrl: ctx.config.plcUrl, fetch: fetchOver(ctx.transport) });
    const firehose = new Firehose({
      idResolver,
      service: owner.pds.replace(/^http/, 'ws'),
      filterCollections: [REF_COLLECTION],
      excludeIdentity: true,
      excludeAccount: true,
      handleEvent: (evt) => {
        if (!('collection' in evt) || evt.collection !== REF_COLLECTION) return;
        const repo = evt.rkey.slice(0, evt.rkey.indexOf('~'));
        if (evt.event === 'delete') return views.apply(evt.did, repo, evt.rkey, null, evt.rev);
        let record;
        try {
          record = parseRefRecord(
            JSON.parse(
              JSON.stringify(evt.record, (_k, v: unknown) =>
                v instanceof Uint8Array ? { $bytes: Buffer.from(v).toString('base64') } : v,
              ),
            ),
          );
        } catch {
          return;
        }
        views.apply(evt.did, repo, evt.rkey, { key: evt.rkey, cid: evt.cid.toString(), record }, evt.rev);
      },
      onError: (err) => log(`event stream of ${owner.pds}: ${err.message}`),
    });
    const since = Date.now();
    streams.set(owner.pds, { stop: () => firehose.destroy(), since });
    void firehose.start();
    log(`following ${owner.pds}`);
    return since;
  }

  /** Lists a repository into its view once the account's events are followed, so nothing falls between. */
  function load(owner: Identity, name: string): Promise<void> {
    const k = Views.key(owner.did, name);
    let p = loading.get(k);
    if (p === undefined) {
      p = (async () => {
        const since = await follow(owner);
        const wait = since + STREAM_SETTLE_MS - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const refs = await new RemoteRepo(ctx, owner, name, log).listRefs();
        views.load(owner.did, name, refs, true);
      })().finally(() => loading.delete(k));
      loading.set(k, p);
    }
    return p;
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://agent');
    if (url.pathname === '/forward') {
      const target = new URL(String(req.headers['x-knotless-url']));
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if (
          typeof v === 'string' &&
          !k.startsWith('x-knotless-') &&
          !['host', 'connection', 'content-length'].includes(k)
        )
          headers[k] = v;
      }
      const body = await readBody(req);
      // The helper's cap for this answer travels with it, so the agent never holds more than it would.
      const cap = Number(req.headers['x-knotless-max-bytes']);
      let out;
      try {
        out = await ctx.transport.request(target, {
          method: req.method ?? 'GET',
          headers,
          body: body.length > 0 ? body : null,
          ...(Number.isSafeInteger(cap) && cap >= 0 ? { maxBytes: cap } : {}),
        });
      } catch (err) {
        // The helper rebuilds the same fault from these headers, as if it had met it itself.
        const { code, limit } = err as { code?: unknown; limit?: unknown };
        if (typeof code !== 'string') throw err;
        res
          .writeHead(502, {
            'x-knotless-error': code,
            'x-knotless-limit': typeof limit === 'number' ? String(limit) : '',
          })
          .end(err instanceof Error ? err.message : String(err));
        return;
      }
      const back: Record<string, string> = {};
      for (const [k, v] of Object.entries(out.headers))
        if (
          typeof v === 'string' &&
          !['connection', 'keep-alive', 'transfer-encoding', 'content-length'].includes(k)
        )
          back[k] = v;
      res.writeHead(out.status, back).end(out.body);
      return;
    }
    if (url.pathname === '/view') {
      const owner: Identity = {
        did: url.searchParams.get('did')!,
        handle: undefined,
        pds: url.searchParams.get('pds')!,
      };
      const name = url.searchParams.get('repo')!;
      const view = views.get(owner.did, name);
      if (view === undefined || !view.confirmed) {
        // The first helper to ask lists for itself; the view is ready for the next one.
        void load(owner, name).catch((err: unknown) => log(`listing ${owner.did}/${name}: ${String(err)}`));
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ confirmed: false }));
        return;
      }
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ confirmed: true, refs: writeWireRefs([...view.refs.values()]) }));
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
      if (body.invalidate === true) views.invalidate(body.did, body.repo);
      for (const r of parseWireRefs(body.written ?? []))
        views.apply(body.did, body.repo, r.key, r, r.rev ?? '');
      for (const d of body.deleted ?? []) views.apply(body.did, body.repo, d.key, null, d.rev);
      res.writeHead(204).end();
      return;
    }
    if (url.pathname === '/health') {
      res.writeHead(200).end('ok');
      return;
    }
    res.writeHead(404).end();
  }

  // A socket file left by an agent that died would refuse our listen: remove it.
  fs.rmSync(socket, { force: true });
  const server = http.createServer((req, res) => {
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
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socket, resolve);
  });
  fs.chmodSync(socket, 0o600);
  return {
    socket,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      for (const s of streams.values()) await s.stop();
      fs.rmSync(socket, { force: true });
    },
  };
}
