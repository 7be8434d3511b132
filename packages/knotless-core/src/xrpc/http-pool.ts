import type * as Http from 'node:http';
import type * as Net from 'node:net';
import type * as Stream from 'node:stream';
import type * as Tls from 'node:tls';
import { bodyLength, writeBody, type RequestBody } from './request-body.ts';

// The HTTP client: node:http and node:https with keep-alive agents, which own the framing (the
// protocol is theirs, not ours to parse), and a thin layer of bounds on top: a cap on each answer's
// body (checked against Content-Length before reading, and counted as it arrives), an idle timeout
// and a total deadline, abort signals, a sink for bodies too large to keep, no redirects (the
// caller's business: see client.ts and fetchOver), and connections opened ahead of a request.

/** Where a connection goes: a TCP host and port (TLS when secure), or a Unix socket. */
export type Endpoint =
  | { kind: 'tcp'; host: string; port: number; secure: boolean; address?: string }
  | { kind: 'unix'; path: string };

/** Response header values by lower-case name; repeated headers are joined with ", ". */
export type ResponseHeaders = Record<string, string | undefined>;

/** One request. */
export interface PoolRequest {
  method: string;
  /** Path and query, e.g. `/xrpc/com.atproto.repo.listRecords?repo=...`. */
  target: string;
  headers: Record<string, string>;
  body: RequestBody;
  /** Most bytes the answer's body may have (the pool's default when absent); past it the answer is cut. */
  maxBytes?: number;
  /** This request's time limit in ms, instead of the pool's (the agent applies its helper's). */
  deadlineMs?: number;
  /** Abandons the request (the connection is destroyed) and rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Receives a 2xx answer's body piece by piece as it arrives instead of keeping it (the response's
   * `body` is then empty), for downloads written to disk; the cap holds all the same. A sink that
   * returns a promise (a piece written on to a slower peer) pauses the answer until it settles.
   */
  sink?: (part: Buffer) => void | Promise<void>;
  /** Told a 2xx answer's status and headers before its body goes to `sink` (a proxy answers on). */
  onHead?: (status: number, headers: ResponseHeaders) => void;
}

/** A complete response. */
export interface PoolResponse {
  status: number;
  headers: ResponseHeaders;
  body: Buffer;
}

/** An error from the connection, with a Node-style `code` (ECONNREFUSED, ETIMEDOUT, ...). */
export type ConnectionError = Error & { code?: string; limit?: number };

/** The bounds every exchange of a pool keeps, unless a request says otherwise. */
export interface HttpLimits {
  /** Trusted certificates of TLS connections, replacing Node's (pass its roots plus the user's). */
  ca?: string[] | undefined;
  /** Milliseconds of silence tolerated (connecting, or between two pieces of the answer). */
  idleMs?: number;
  /** Milliseconds from sending a request to the end of its answer, however it trickles. */
  deadlineMs?: number;
  /** Default cap on an answer's body, for requests that do not set their own. */
  maxBytes?: number;
}

/** Defaults: 30 s of silence, 120 s for a whole answer, 4 MiB of body. */
export const DEFAULT_IDLE_MS = 30_000;
export const DEFAULT_DEADLINE_MS = 120_000;
export const DEFAULT_MAX_BYTES = 4 * 1024 * 1024;
/** The least an error answer (non-2xx) may have, whatever the cap for a successful one. */
const ERROR_BODY_BYTES = 64 * 1024;

/** Thrown when a body grows, or is announced, past the caller's cap; the connection is dropped. */
export class BodyTooLarge extends Error {
  readonly code = 'ETOOLARGE';
  readonly limit: number;

  constructor(limit: number) {
    super(`the answer is larger than the ${limit} bytes allowed for it`);
    this.limit = limit;
  }
}

const fault = (message: string, code: string, limit?: number): ConnectionError =>
  Object.assign(new Error(message), { code, ...(limit === undefined ? {} : { limit }) });

const isParseError = (err: ConnectionError): boolean =>
  typeof err.code === 'string' && err.code.startsWith('HPE_');

/** Node's parser errors (HPE_…) are one fault to the caller: bytes that are not an HTTP answer. */
function normalized(err: ConnectionError): ConnectionError {
  return isParseError(err) && err.code !== 'HPE_INVALID'
    ? fault(`${err.code}: ${err.message}`, 'HPE_INVALID')
    : err;
}

/** Keep-alive connections by endpoint; requests in parallel each get a connection of their own. */
export class HttpPool {
  readonly #limits: Required<Omit<HttpLimits, 'ca'>> & { ca: string[] | undefined };
  #plain: Http.Agent | undefined;
  #secure: Http.Agent | undefined;
  /**
   * The trusted certificates made into a TLS context once: given as `ca`, Node parses them again
   * for every connection and joins them into every request's agent name.
   */
  #trust: Tls.SecureContext | undefined;
  /** Connections opened ahead of a request (see preconnect), by the agent's name for them. */
  readonly #warm = new Map<string, { socket: Net.Socket; release: () => void }>();
  /** Sockets handed from #warm to a request: a failure on one before any answer may be retried. */
  readonly #handed = new WeakSet<Net.Socket>();
  #closed = false;

  constructor(limits: HttpLimits = {}) {
    const deadlineMs = limits.deadlineMs ?? DEFAULT_DEADLINE_MS;
    this.#limits = {
      ca: limits.ca,
      deadlineMs,
      idleMs: Math.min(limits.idleMs ?? DEFAULT_IDLE_MS, deadlineMs),
      maxBytes: limits.maxBytes ?? DEFAULT_MAX_BYTES,
    };
  }

  /** Sends a request, reusing an idle connection when there is one. */
  async request(endpoint: Endpoint, req: PoolRequest): Promise<PoolResponse> {
    for (;;) {
      req.signal?.throwIfAborted();
      try {
        return await this.#exchange(endpoint, req);
      } catch (err) {
        // A server may close an idle connection just as we reuse it; it then never saw the request,
        // so it goes again (an idle connection is dropped from the pool once closed).
        if (!(err instanceof StaleConnection)) throw err;
      }
    }
  }

  /**
   * Opens a connection (TCP, and TLS) to `endpoint` now, for the next request to use: a caller that
   * has local work to do first (`repo commit` runs git) overlaps the handshakes' round trips with it.
   * Does nothing when one is warming already. A failure is silent: the request connects again.
   */
  preconnect(endpoint: Endpoint): void {
    if (this.#closed) return;
    const agent = this.#agentFor(endpoint);
    const opts = this.#options(endpoint, { method: 'GET', target: '/', headers: {}, body: null });
    const name = agent.getName(opts);
    if (this.#warm.has(name) || (agent.freeSockets[name]?.length ?? 0) > 0) return;
    const socket = this.#connect(endpoint, opts);
    // It must not keep the process alive, nor outlive a server that drops it.
    socket.unref();
    const drop = (): void => {
      if (this.#warm.get(name)?.socket === socket) this.#warm.delete(name);
      release();
      socket.destroy();
    };
    const release = (): void => {
      socket.off('error', drop).off('close', drop).off('data', drop);
    };
    socket.on('error', drop).on('close', drop);
    // Bytes before any request: not a server to talk to.
    socket.on('data', drop);
    this.#warm.set(name, { socket, release });
  }

  /** Closes idle connections; requests in flight finish. */
  close(): void {
    this.#closed = true;
    for (const agent of [this.#plain, this.#secure])
      for (const sockets of Object.values(agent?.freeSockets ?? {}))
        for (const s of sockets ?? []) s.destroy();
    for (const w of this.#warm.values()) w.socket.destroy();
    this.#warm.clear();
  }

  #agentFor(endpoint: Endpoint): Http.Agent {
    if (endpoint.kind === 'tcp' && endpoint.secure) {
      // node:https (and node:tls) load on the first https request: a dev network never pays for them.
      this.#secure ??= this.#agent(process.getBuiltinModule('node:https').Agent);
      return this.#secure;
    }
    this.#plain ??= this.#agent(process.getBuiltinModule('node:http').Agent);
    return this.#plain;
  }

  /**
   * A keep-alive agent whose new connection is the warm one when there is one (see preconnect), and
   * which keeps no connection once the pool is closed.
   */
  #agent(Base: typeof Http.Agent): Http.Agent {
    const closed = (): boolean => this.#closed;
    const takeWarm = (name: string): Net.Socket | undefined => {
      const warm = this.#warm.get(name);
      if (warm === undefined) return undefined;
      this.#warm.delete(name);
      warm.release();
      if (warm.socket.destroyed) return undefined;
      warm.socket.ref();
      this.#handed.add(warm.socket);
      return warm.socket;
    };
    return new (class extends Base {
      override keepSocketAlive(socket: Net.Socket): boolean {
        return !closed() && (super.keepSocketAlive(socket) as unknown as boolean);
      }

      override createConnection(
        opts: Http.ClientRequestArgs,
        cb?: (err: Error | null, stream: Stream.Duplex) => void,
      ): Stream.Duplex | null | undefined {
        return takeWarm(this.getName(opts)) ?? super.createConnection(opts, cb);
      }
    })({ keepAlive: true, scheduling: 'lifo' });
  }

  #connect(endpoint: Endpoint, opts: Http.RequestOptions): Net.Socket {
    return this.#agentFor(endpoint).createConnection({
      ...opts,
      // As the agent does: `path` is the request's in these options, and a socket's path to net.
      path: endpoint.kind === 'unix' ? endpoint.path : null,
    }) as Net.Socket;
  }

  #trusted(ca: string[]): Tls.SecureContext {
    return (this.#trust ??= process.getBuiltinModule('node:tls').createSecureContext({ ca }));
  }

  #options(endpoint: Endpoint, req: PoolRequest): Http.RequestOptions & Record<string, unknown> {
    const base = { method: req.method, path: req.target, headers: req.headers };
    // No TLS: no server name, said so that Node does not work one out (see ipLiteral).
    if (endpoint.kind === 'unix') return { ...base, socketPath: endpoint.path, servername: '' };
    const tls = endpoint.secure
      ? {
          // Always set, so that a preconnected connection and a request's agree on their agent's name.
          servername: ipLiteral(endpoint.host) ? '' : endpoint.host,
          ALPNProtocols: ['http/1.1'],
          ...(this.#limits.ca === undefined ? {} : { secureContext: this.#trusted(this.#limits.ca) }),
        }
      : { servername: '' };
    return { ...base, host: endpoint.address ?? endpoint.host, port: endpoint.port, ...tls };
  }

  #exchange(endpoint: Endpoint, req: PoolRequest): Promise<PoolResponse> {
    const deadlineMs = req.deadlineMs ?? this.#limits.deadlineMs;
    const idleMs = Math.min(this.#limits.idleMs, deadlineMs);
    const maxBytes = req.maxBytes ?? this.#limits.maxBytes;
    const mod = process.getBuiltinModule(
      endpoint.kind === 'tcp' && endpoint.secure ? 'node:https' : 'node:http',
    );
    return new Promise((resolve, reject) => {
      const length = bodyLength(req.method, req.body);
      const headers = length === null ? req.headers : { ...req.headers, 'content-length': String(length) };
      const opts = { ...this.#options(endpoint, req), headers, agent: this.#agentFor(endpoint) };
      let out: Http.ClientRequest;
      try {
        out = mod.request(opts);
      } catch (err) {
        // Bad headers (a line break in a value) are refused before anything is sent.
        return reject(err instanceof Error ? err : new Error(String(err)));
      }
      let res: Http.IncomingMessage | undefined;
      let settled = false;
      const finish = (err: ConnectionError | undefined, answer?: PoolResponse, ours = false): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        req.signal?.removeEventListener('abort', onAbort);
        if (err === undefined) return resolve(answer!);
        out.destroy();
        res?.destroy();
        // Only the server's doing on a reused or warm connection, before any answer, may be retried.
        const socket = out.socket;
        const retry =
          !ours && res === undefined && (out.reusedSocket || (socket !== null && this.#handed.has(socket)));
        if (socket !== null) this.#handed.delete(socket);
        reject(retry ? new StaleConnection(err) : normalized(err));
      };
      // Once the answer has begun, a lost connection means a cut answer, not an unreachable server.
      const cut = (why: string): ConnectionError => fault(`the answer was cut short (${why})`, 'ETRUNCATED');
      const onAbort = (): void => finish(req.signal!.reason as Error, undefined, true);
      const deadline = setTimeout(
        () =>
          finish(
            fault(`no complete answer within ${deadlineMs / 1000} s`, 'EDEADLINE', deadlineMs),
            undefined,
            true,
          ),
        deadlineMs,
      );
      req.signal?.addEventListener('abort', onAbort, { once: true });
      // setTimeout covers the socket once connected; connecting is bounded here.
      out.once('socket', (socket: Net.Socket) => {
        if (!socket.connecting) return;
        const t = setTimeout(() => finish(fault('timed out', 'ETIMEDOUT'), undefined, true), idleMs);
        socket.once('connect', () => clearTimeout(t)).once('close', () => clearTimeout(t));
      });
      out.setTimeout(idleMs, () =>
        finish(
          res === undefined ? fault('timed out', 'ETIMEDOUT') : cut(`silent for ${idleMs / 1000} s`),
          undefined,
          true,
        ),
      );
      // A parse error is unreadable bytes wherever it came; anything else after the head cut the answer.
      out.on('error', (err: ConnectionError) =>
        finish(res === undefined || isParseError(err) ? err : cut(err.code ?? err.message)),
      );
      out.on('response', (answer: Http.IncomingMessage) => {
        res = answer;
        const status = answer.statusCode ?? 0;
        const ok = status >= 200 && status < 300;
        // An error's explanation may be longer than a tiny expected answer (a proxy's HTML page).
        const cap = ok ? maxBytes : Math.max(maxBytes, ERROR_BODY_BYTES);
        const head = headersOf(answer);
        // HTTP/1.0 closes after each answer unless it negotiated otherwise, which we never ask for.
        const socket = answer.socket;
        if (answer.httpVersionMinor === 0) answer.once('end', () => socket.destroy());
        if (Number(head['content-length']) > cap) return finish(new BodyTooLarge(cap), undefined, true);
        const sink = ok ? req.sink : undefined;
        try {
          if (sink !== undefined) req.onHead?.(status, head);
        } catch (err) {
          return finish(err as Error, undefined, true);
        }
        const parts: Buffer[] = [];
        let size = 0;
        let pending = 0;
        answer.on('data', (part: Buffer) => {
          size += part.length;
          if (size > cap) return finish(new BodyTooLarge(cap), undefined, true);
          if (sink === undefined) return void parts.push(part);
          const wrote = sink(part);
          if (!(wrote instanceof Promise)) return;
          if (pending++ === 0) answer.pause();
          wrote.then(
            () => {
              if (--pending === 0) answer.resume();
              // `complete` says the parser has read the whole answer, not that every piece reached
              // the sink: pieces may still wait in the paused stream. Only 'end' says they have.
              if (pending === 0 && answer.readableEnded) done();
            },
            (err: unknown) => finish(err as Error, undefined, true),
          );
        });
        const done = (): void => {
          if (pending === 0) finish(undefined, { status, headers: head, body: Buffer.concat(parts) });
        };
        answer.on('end', done);
        answer.on('error', (err: ConnectionError) => finish(cut(err.code ?? err.message)));
        answer.on('close', () => {
          if (!answer.complete) finish(cut('connection closed'));
        });
      });
      writeBody(out, req.body).catch((err: unknown) => finish(err as Error, undefined, true));
    });
  }
}

/** Response headers as one string each: repeated ones (set-cookie) joined with ", ". */
function headersOf(res: Http.IncomingMessage): ResponseHeaders {
  const out: ResponseHeaders = {};
  for (const [k, v] of Object.entries(res.headers)) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

/** A reused connection failed before any byte of the answer: the request may be sent again. */
class StaleConnection extends Error {
  constructor(cause: ConnectionError) {
    super(cause.message, { cause });
  }
}

/**
 * Whether a host (a URL's hostname, brackets removed) is an IP address, which TLS must not send as
 * a server name. A URL's parser writes IPv4 in dotted decimal and IPv6 with colons, which no DNS
 * name has, so no full parse is needed: Node's `net.isIP` compiles its IPv6 pattern on first use,
 * about 5 ms of a command's start.
 */
export function ipLiteral(host: string): boolean {
  return host.includes(':') || /^\d{1,3}(?:\.\d{1,3}){3}$/.test(host);
}
