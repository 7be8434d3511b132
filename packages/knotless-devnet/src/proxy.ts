import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { pipeline } from 'node:stream';
import {
  FaultScript,
  answerFault,
  cutAnswer,
  slowAnswer,
  type FaultRule,
  type FiredFault,
} from './faults.ts';
import { listenOnFreePort } from './ports.ts';
import { connectionOwner } from './socket-owner.ts';

/** One request the proxy received. */
export interface RequestLog {
  method: string;
  /** Path and query as the client sent them. */
  path: string;
  /** The XRPC method for paths under /xrpc/. */
  nsid: string | undefined;
  /** The status sent to the client; 0 until answered, and stays 0 when the client left first. */
  status: number;
  /** The client TCP connection it came on; ids count up from 1 and are never reused, not even after reset(). */
  connection: number;
  /** Which of {@link ProxyOptions.watchPids} sent it (held the connection's client end), if any. */
  pid?: number;
  /** The scripted fault that hit it, if any. */
  fault?: string;
  /**
   * The write points the reference PDS (and bsky.social) charges the account for it: create 3,
   * update 2, delete 1, putRecord always 2 (see writePoints); 0 for reads and for requests the proxy
   * answered itself. Known once the request's body has passed.
   */
  points: number;
  /** Bytes of the answer's body forwarded to the client so far (what a download cost). */
  bytes: number;
}

/** What an {@link ProxyOptions.onRequest} hook is told about a request. */
export interface ProxyRequest {
  method: string;
  path: string;
  nsid: string | undefined;
  /** The body's Content-Length, when the client sent one: tells apart uploads of different sizes. */
  length?: number;
}

/** Options for {@link startProxy}. */
export interface ProxyOptions {
  /** The origin to forward to, e.g. a PDS's url. */
  target: string;
  /**
   * Other origins by DID: a request whose query names one of these DIDs (`repo=` or `did=`, as the
   * reads of records and blobs do), or else whose bearer token is one of that DID's (its `sub`),
   * goes to that origin instead, so that one proxy (one KNOTLESS_SERVICE) can stand in front of a
   * network whose accounts live on several PDSes.
   */
  routes?: Record<string, string>;
  /**
   * Awaited before each request is forwarded: the seam for delays and fault injection. The request's body
   * stays unread while it runs. If it throws, the client gets 500 and nothing is forwarded.
   */
  onRequest?: (req: ProxyRequest) => Promise<void> | void;
  /** Serve https with this key and certificate (PEM), e.g. from makeCertificate(). */
  tls?: { key: string; cert: string };
  /** Faults scripted from the start; more can be added with {@link Proxy.inject}. */
  faults?: FaultRule[];
  /**
   * Processes to tell apart (e.g. the agent's): each new connection is looked up among them before
   * its first request goes on, and its requests are logged with `pid` (see socket-owner.ts).
   */
  watchPids?: () => number[];
}

/** A running reverse proxy that logs what passes through it. */
export interface Proxy {
  url: string;
  requests: RequestLog[];
  /** How many requests were logged, optionally only those of one XRPC method. */
  count(nsid?: string): number;
  /** Bytes of answer bodies forwarded to clients, optionally only those of one XRPC method. */
  bytes(nsid?: string): number;
  /** Client connections accepted since start or the last reset(). */
  readonly connections: number;
  /** Empties `requests` in place and zeroes `connections`. */
  reset(): void;
  /** Scripts a fault (drop, delay, 5xx, 429, cut mid-body, a replaced answer) for matching requests. */
  inject(rule: FaultRule): void;
  /** Removes every scripted fault and forgets which fired. */
  clearFaults(): void;
  /** The faults that fired, in order. */
  readonly faultsFired: FiredFault[];
  close(): Promise<void>;
}

// Headers that describe one hop's connection, so each side must set its own.
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'upgrade'];

function endToEnd(headers: http.IncomingHttpHeaders): http.OutgoingHttpHeaders {
  const named = (headers.connection ?? '').split(',').map((h) => h.trim().toLowerCase());
  const drop = new Set([...HOP_BY_HOP, ...named]);
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !drop.has(name)));
}

function nsidOf(path: string): string | undefined {
  return path.startsWith('/xrpc/') ? path.slice('/xrpc/'.length).split('?')[0] : undefined;
}

/** Points per write of applyWrites, as the reference PDS counts them (its `ratelimitPoints`). */
const WRITE_KIND_POINTS: Record<string, number> = { create: 3, update: 2, delete: 1 };
const FIXED_POINTS: Record<string, number> = {
  'com.atproto.repo.createRecord': 3,
  'com.atproto.repo.putRecord': 2,
  'com.atproto.repo.deleteRecord': 1,
};

/**
 * Sets `entry.points` from what the request asks the PDS to write; applyWrites's body is read as it
 * passes (attached with the pipe, so no byte is missed), up to 4 MiB.
 */
function countPoints(req: http.IncomingMessage, entry: RequestLog): void {
  if (entry.nsid !== undefined && FIXED_POINTS[entry.nsid] !== undefined) {
    entry.points = FIXED_POINTS[entry.nsid]!;
    return;
  }
  if (entry.nsid !== 'com.atproto.repo.applyWrites') return;
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size <= 4 * 1024 * 1024) chunks.push(c);
  });
  req.on('end', () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        writes?: Array<{ $type?: string }>;
      };
      entry.points = (body.writes ?? []).reduce(
        (n, w) => n + (WRITE_KIND_POINTS[(w.$type ?? '').split('#')[1] ?? ''] ?? 0),
        0,
      );
    } catch (err) {
      // A body that is not JSON: the PDS refuses it before charging anything.
      if (!(err instanceof SyntaxError)) throw err;
    }
  });
}

function answerError(res: http.ServerResponse, entry: RequestLog, status: number, body: object): void {
  entry.status = status;
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** The `sub` of a bearer or DPoP token (a JWT; read, not verified: it only picks where to forward). */
function tokenSubject(authorization: string | undefined): string | undefined {
  const payload = /^(?:Bearer|DPoP) [^.\s]+\.([^.\s]+)\./.exec(authorization ?? '')?.[1];
  if (payload === undefined) return undefined;
  try {
    const sub = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sub?: unknown }).sub;
    return typeof sub === 'string' ? sub : undefined;
  } catch (err) {
    if (err instanceof SyntaxError) return undefined;
    throw err;
  }
}

/** Starts an HTTP reverse proxy on 127.0.0.1 at a free port, forwarding every request to `opts.target`. */
export async function startProxy(opts: ProxyOptions): Promise<Proxy> {
  const origin = (url: string): URL => {
    const u = new URL(url);
    if (u.protocol !== 'http:') throw new Error(`proxy target must be http: ${url}`);
    return u;
  };
  const defaultTarget = origin(opts.target);
  const routes = new Map(Object.entries(opts.routes ?? {}).map(([did, url]) => [did, origin(url)]));
  const targetOf = (path: string, authorization: string | undefined): URL => {
    const query = new URLSearchParams(path.split('?')[1] ?? '');
    const did = query.get('repo') ?? query.get('did') ?? tokenSubject(authorization);
    return (did === undefined || did === null ? undefined : routes.get(did)) ?? defaultTarget;
  };
  const agent = new http.Agent({ keepAlive: true });
  const requests: RequestLog[] = [];
  const connectionIds = new WeakMap<net.Socket, number>();
  const owners = new WeakMap<net.Socket, Promise<number | undefined>>();
  let lastConnectionId = 0;
  let connections = 0;
  const script = new FaultScript();
  for (const rule of opts.faults ?? []) script.add(rule);

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = req.url ?? '/';
    const method = req.method ?? 'GET';
    const connection = connectionIds.get(req.socket) ?? 0;
    const entry: RequestLog = {
      method,
      path,
      nsid: nsidOf(path),
      status: 0,
      connection,
      points: 0,
      bytes: 0,
    };
    requests.push(entry);
    const owner = await owners.get(req.socket);
    if (owner !== undefined) entry.pid = owner;
    try {
      const length = req.headers['content-length'];
      await opts.onRequest?.({
        method,
        path,
        nsid: entry.nsid,
        ...(length === undefined ? {} : { length: Number(length) }),
      });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      answerError(res, entry, 500, { error: 'ProxyHookFailed', message });
      return;
    }
    if (res.destroyed) return; // the client left while the hook ran
    const fault = script.pick(method, entry.nsid);
    if (fault !== undefined) entry.fault = fault.kind;
    if (fault?.kind === 'delay') await new Promise((r) => setTimeout(r, fault.ms));
    if (fault?.kind === 'hold') await fault.until;
    if (res.destroyed) return; // the client left while it was held
    const faulted = fault === undefined ? undefined : answerFault(fault, req, res);
    if (faulted !== undefined) {
      entry.status = faulted;
      return;
    }

    const target = targetOf(path, req.headers.authorization);
    const upstream = http.request({
      hostname: target.hostname,
      port: target.port,
      method,
      path,
      headers: { ...endToEnd(req.headers), host: target.host },
      agent,
    });
    upstream.on('response', (up) => {
      entry.status = up.statusCode ?? 502;
      up.on('data', (chunk: Buffer) => (entry.bytes += chunk.length));
      if (fault?.kind === 'cut') return cutAnswer(up, res, fault.bytes);
      if (fault?.kind === 'slow-answer') return slowAnswer(up, res, fault.everyMs);
      const added = fault?.kind === 'headers' ? fault.headers : {};
      res.writeHead(entry.status, { ...endToEnd(up.headers), ...added });
      // Either side failing mid-body destroys the other, so the client sees a cut response, not a hang.
      pipeline(up, res, () => {});
    });
    upstream.on('error', (err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      // Drain what the client is still sending, so its keep-alive connection stays usable.
      req.resume();
      answerError(res, entry, 502, { error: 'BadGateway', message: `${target.origin}: ${err.message}` });
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    countPoints(req, entry);
    req.pipe(upstream);
  }

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => void handle(req, res);
  const server =
    opts.tls === undefined ? http.createServer(onRequest) : https.createServer(opts.tls, onRequest);
  // Node's 5 s default would race clients that reuse an idle connection; match the PDS (see http.ts).
  server.keepAliveTimeout = 90_000;
  // For TLS the request's socket is the TLS socket, which 'secureConnection' hands out.
  server.on(opts.tls === undefined ? 'connection' : 'secureConnection', (socket: net.Socket) => {
    connectionIds.set(socket, ++lastConnectionId);
    connections++;
    // Looked up while the client is connected (and waiting for its answer), so its descriptor is there.
    const pids = opts.watchPids?.() ?? [];
    if (pids.length > 0) owners.set(socket, connectionOwner(socket.remotePort!, port, pids));
  });
  const port = await listenOnFreePort(server);

  return {
    url: `${opts.tls === undefined ? 'http' : 'https'}://127.0.0.1:${port}`,
    requests,
    count: (nsid) => (nsid === undefined ? requests.length : requests.filter((r) => r.nsid === nsid).length),
    bytes: (nsid) =>
      requests.filter((r) => nsid === undefined || r.nsid === nsid).reduce((sum, r) => sum + r.bytes, 0),
    get connections() {
      return connections;
    },
    reset() {
      requests.length = 0;
      connections = 0;
    },
    inject: (rule) => script.add(rule),
    clearFaults: () => script.clear(),
    faultsFired: script.fired,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
