import type * as Net from 'node:net';
import type * as Tls from 'node:tls';
import { writeRequest, type RequestBody } from './http1-body.ts';
import {
  BodyDecoder,
  BodyTooLarge,
  bodyFraming,
  parseResponseHead,
  type ResponseHead,
  type ResponseHeaders,
} from './http1-codec.ts';

// Why a hand-written HTTP/1.1 client: every git command starts the helper afresh, and its start-up is
// on the critical path of each push and fetch. Over plain http (the dev network) node:http costs about
// 7 ms of module loading before the first byte is sent, Node's bundled fetch about 30 ms, the undici
// package 100 ms. Over TLS, where node:tls loads anyway, `npm run bench:tls` (2026-11-30, medians of
// 40 alternated runs) found this client 2-4 ms of CPU cheaper than node:https loaded lazily and level
// with it on the clock within noise, and the undici package twice as costly: it stays (see
// docs/reference/performance.md). What it must do is bounded and written here: keep-alive, TLS, a cap
// on each answer's body (checked against Content-Length before reading, and counted as chunked or
// close-delimited bodies arrive), an idle timeout and a total deadline, abort signals, a sink for
// bodies too large to keep. Redirects are the caller's business (see client.ts and fetchOver).

/**
 * The event a connection's bytes arrive as. A socket reads into one buffer of its own (`onread`)
 * instead of a new one per read: those are garbage V8 collects only after some tens of megabytes of
 * them, so a download's peak memory grew with its size (docs/reference/performance.md, "Memory").
 * A listener sees a view of that buffer, valid only during the call: it copies what it keeps.
 */
const BYTES = 'knotless:bytes';
const READ_BUFFER = 64 * 1024;

/**
 * A connection whose bytes arrive as {@link BYTES}, read into one buffer of its own: `connect` is
 * net.connect or tls.connect (for TLS the buffer takes the decrypted bytes).
 */
function connectReading<O>(
  connect: (opts: O & { onread: Net.OnReadOpts }) => Net.Socket,
  opts: O,
): Net.Socket {
  const buffer = Buffer.allocUnsafe(READ_BUFFER);
  const socket: Net.Socket = connect({
    ...opts,
    onread: {
      buffer,
      // Called only once the socket reads, after it is assigned.
      callback: (n, buf) => {
        socket.emit(BYTES, buf.subarray(0, n));
        // Keep reading (false would pause the socket).
        return true;
      },
    },
  });
  return socket;
}

/** Where a connection goes: a TCP host and port (TLS when secure), or a Unix socket. */
export type Endpoint =
  | { kind: 'tcp'; host: string; port: number; secure: boolean; address?: string }
  | { kind: 'unix'; path: string };

/** One request. */
export interface Http1Request {
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
   * `body` is then empty), for downloads written to disk; the cap holds all the same. A piece is only
   * valid during the call: copy or write it before returning. Error answers are always kept, to be read.
   * A sink that returns a promise (a piece written on to a slower peer) is given the piece until then:
   * the connection stops reading until every such promise has settled.
   */
  sink?: (part: Buffer) => void | Promise<void>;
  /** Told a 2xx answer's status and headers before its body goes to `sink` (a proxy answers on). */
  onHead?: (status: number, headers: ResponseHeaders) => void;
}

/** A complete response. */
export interface Http1Response {
  status: number;
  headers: ResponseHeaders;
  body: Buffer;
}

/** An error from the connection, with a Node-style `code` (ECONNREFUSED, ETIMEDOUT, ...). */
export type ConnectionError = Error & { code?: string; limit?: number };

/** The bounds every exchange of a pool keeps, unless a request says otherwise. */
export interface Http1Limits {
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

const net = process.getBuiltinModule('node:net');

/** Keep-alive connections by endpoint; requests in parallel each get a connection of their own. */
export class Http1Pool {
  /** Idle connections by endpoint, each with the function that takes it back out of the pool. */
  readonly #idle = new Map<string, { socket: Net.Socket; unpark: () => void }[]>();
  /** Connections opened ahead of a request (see preconnect), by endpoint. */
  readonly #warm = new Map<string, { socket: Net.Socket; release: () => void }>();
  readonly #ca: string[] | undefined;
  readonly #idleMs: number;
  readonly #deadlineMs: number;
  readonly #maxBytes: number;
  #closed = false;

  constructor(limits: Http1Limits = {}) {
    this.#ca = limits.ca;
    this.#deadlineMs = limits.deadlineMs ?? DEFAULT_DEADLINE_MS;
    this.#idleMs = Math.min(limits.idleMs ?? DEFAULT_IDLE_MS, this.#deadlineMs);
    this.#maxBytes = limits.maxBytes ?? DEFAULT_MAX_BYTES;
  }

  /** Sends a request, reusing an idle connection when there is one. */
  async request(endpoint: Endpoint, req: Http1Request): Promise<Http1Response> {
    req.signal?.throwIfAborted();
    const key = endpointKey(endpoint);
    const idle = this.#idle.get(key)?.pop();
    if (idle !== undefined) {
      idle.unpark();
      try {
        return await this.#exchange(idle.socket, key, req, true);
      } catch (err) {
        // A server may close an idle connection just as we reuse it; it then never saw the request,
        // so send it once more on a fresh connection.
        if (!(err instanceof StaleConnection)) throw err;
      }
    }
    const warm = this.#warm.get(key);
    if (warm !== undefined) {
      this.#warm.delete(key);
      warm.release();
      try {
        // Like an idle connection, the server may have dropped it before the request: then the
        // request goes again on a fresh one.
        return await this.#exchange(warm.socket, key, req, true);
      } catch (err) {
        if (!(err instanceof StaleConnection)) throw err;
      }
    }
    return this.#exchange(this.#connect(endpoint), key, req, false);
  }

  /**
   * Opens a connection (TCP, and TLS) to `endpoint` now, for the next request to use: a caller that
   * has local work to do first (`repo commit` runs git) overlaps the handshakes' round trips with it.
   * Does nothing when a connection is idle or warming already. A failure is silent: the request
   * connects again and meets it.
   */
  preconnect(endpoint: Endpoint): void {
    const key = endpointKey(endpoint);
    if (this.#closed || this.#warm.has(key) || (this.#idle.get(key)?.length ?? 0) > 0) return;
    const socket = this.#connect(endpoint);
    // It must not keep the process alive, nor outlive a server that drops it.
    socket.unref();
    const drop = (): void => {
      if (this.#warm.get(key)?.socket === socket) this.#warm.delete(key);
      release();
      socket.destroy();
    };
    const release = (): void => {
      socket.off('error', drop);
      socket.off('close', drop);
      socket.off(BYTES, drop);
    };
    socket.on('error', drop);
    socket.on('close', drop);
    socket.on(BYTES, drop);
    this.#warm.set(key, { socket, release });
  }

  /** Closes idle connections; requests in flight finish. */
  close(): void {
    this.#closed = true;
    for (const sockets of this.#idle.values()) for (const s of sockets) s.socket.destroy();
    this.#idle.clear();
    for (const w of this.#warm.values()) w.socket.destroy();
    this.#warm.clear();
  }

  #connect(endpoint: Endpoint): Net.Socket {
    if (endpoint.kind === 'unix') return connectReading(net.connect, { path: endpoint.path });
    const host = endpoint.address ?? endpoint.host;
    if (!endpoint.secure) return connectReading(net.connect, { host, port: endpoint.port, noDelay: true });
    // node:tls loads on the first https request: a dev network on http never pays for it.
    const tls: typeof Tls = process.getBuiltinModule('node:tls');
    const socket = connectReading(tls.connect, {
      host,
      port: endpoint.port,
      ...(net.isIP(endpoint.host) === 0 ? { servername: endpoint.host } : {}),
      ALPNProtocols: ['http/1.1'],
      ...(this.#ca === undefined ? {} : { ca: this.#ca }),
    });
    socket.setNoDelay(true);
    return socket;
  }

  #exchange(socket: Net.Socket, key: string, req: Http1Request, reused: boolean): Promise<Http1Response> {
    return new Promise((resolve, reject) => {
      let received = 0;
      let buf: Buffer = Buffer.alloc(0);
      let head: ResponseHead | undefined;
      let decoder: BodyDecoder | undefined;
      const maxBytes = req.maxBytes ?? this.#maxBytes;
      const deadlineMs = req.deadlineMs ?? this.#deadlineMs;
      const idleMs = Math.min(this.#idleMs, deadlineMs);
      let settled = false;
      // Until the whole body is written the connection cannot carry another request.
      let sending = true;
      const finish = (err: ConnectionError | undefined, res?: Http1Response, ours = false): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        req.signal?.removeEventListener('abort', onAbort);
        socket.off(BYTES, onData);
        socket.off('error', onError);
        socket.off('close', onClose);
        socket.off('timeout', onTimeout);
        if (err !== undefined) {
          socket.destroy();
          // Only the server's doing may mean a stale connection: a cap, a deadline or an abort is final.
          reject(reused && received === 0 && !ours ? new StaleConnection(err) : err);
        } else resolve(res!);
      };
      // Once the answer has begun, a lost connection means a cut answer, not an unreachable server.
      const cut = (why: string): ConnectionError =>
        Object.assign(new Error(`the answer was cut short (${why})`), { code: 'ETRUNCATED' });
      const onError = (err: ConnectionError): void =>
        finish(head === undefined ? err : cut(err.code ?? err.message));
      const onTimeout = (): void =>
        finish(
          head === undefined
            ? Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })
            : cut(`silent for ${idleMs / 1000} s`),
          undefined,
          true,
        );
      const onAbort = (): void => finish(req.signal!.reason as Error, undefined, true);
      const deadline = setTimeout(
        () =>
          finish(
            Object.assign(new Error(`no complete answer within ${deadlineMs / 1000} s`), {
              code: 'EDEADLINE',
              limit: deadlineMs,
            }),
            undefined,
            true,
          ),
        deadlineMs,
      );
      const onClose = (): void => {
        if (decoder?.end() === true) return complete(Buffer.alloc(0), false);
        finish(
          head === undefined
            ? Object.assign(new Error('connection closed before the response ended'), { code: 'ECONNRESET' })
            : cut('connection closed'),
        );
      };
      const complete = (rest: Buffer, keep: boolean): void => {
        const res = { status: head!.status, headers: head!.headers, body: decoder!.body() };
        finish(undefined, res);
        if (keep && !sending && rest.length === 0 && !this.#closed) this.#park(socket, key);
        else socket.destroy();
      };
      // Reading stops while a sink's promise is pending: its piece is a view of the read buffer.
      let pending = 0;
      const sinkOf =
        (sink: NonNullable<Http1Request['sink']>) =>
        (part: Buffer): void => {
          const wrote = sink(part);
          if (!(wrote instanceof Promise)) return;
          if (pending++ === 0) socket.pause();
          const done = (): void => {
            // Also once the answer is complete: a parked connection must read again to be reused.
            if (--pending === 0) socket.resume();
          };
          wrote.then(done, (err: unknown) => {
            done();
            finish(err as Error, undefined, true);
          });
        };
      const onData = (data: Buffer): void => {
        received += data.length;
        try {
          if (decoder === undefined) {
            // A copy: `data` is a view of the connection's read buffer (see BYTES).
            buf = Buffer.concat([buf, data]);
            head = parseResponseHead(buf);
            if (head === undefined) return;
            // An interim 1xx response (100 Continue) precedes the real one.
            if (head.status < 200) {
              buf = buf.subarray(head.length);
              head = undefined;
              return onData(Buffer.alloc(0));
            }
            const ok = head.status >= 200 && head.status < 300;
            decoder = new BodyDecoder(bodyFraming(req.method, head), {
              // An error's explanation may be longer than a tiny expected answer (a proxy's HTML page).
              max: ok ? maxBytes : Math.max(maxBytes, ERROR_BODY_BYTES),
              ...(ok && req.sink !== undefined ? { sink: sinkOf(req.sink) } : {}),
            });
            if (ok && req.sink !== undefined) req.onHead?.(head.status, head.headers);
            data = buf.subarray(head.length);
          }
          const rest = decoder.push(data);
          if (rest !== undefined) complete(rest, keepAlive(head!));
        } catch (err) {
          finish(err as Error, undefined, err instanceof BodyTooLarge);
        }
      };
      socket.setTimeout(idleMs);
      socket.ref();
      socket.on(BYTES, onData);
      socket.on('error', onError);
      socket.on('close', onClose);
      socket.on('timeout', onTimeout);
      req.signal?.addEventListener('abort', onAbort, { once: true });
      writeRequest(socket, req).then(
        () => (sending = false),
        (err: unknown) => {
          sending = false;
          finish(err as Error);
        },
      );
    });
  }

  /** Keeps a connection for the next request, without keeping the process alive for it. */
  #park(socket: Net.Socket, key: string): void {
    socket.setTimeout(0);
    socket.unref();
    const list = this.#idle.get(key) ?? [];
    // Anything from the server while idle (a close, an error, stray bytes) makes it unusable.
    const drop = (): void => {
      const i = list.indexOf(entry);
      if (i >= 0) list.splice(i, 1);
      unpark();
      socket.destroy();
    };
    const unpark = (): void => {
      socket.off('close', drop);
      socket.off('error', drop);
      socket.off(BYTES, drop);
    };
    const entry = { socket, unpark };
    list.push(entry);
    this.#idle.set(key, list);
    socket.on('close', drop);
    socket.on('error', drop);
    socket.on(BYTES, drop);
  }
}

/** HTTP/1.0 closes after each answer unless it negotiated otherwise, which we never ask for. */
function keepAlive(head: ResponseHead): boolean {
  return head.minor >= 1 && !/(^|,)\s*close\s*(,|$)/i.test(head.headers['connection'] ?? '');
}

/** A reused connection failed before any byte of the answer: the request may be sent again. */
class StaleConnection extends Error {
  constructor(cause: ConnectionError) {
    super(cause.message, { cause });
  }
}

function endpointKey(e: Endpoint): string {
  return e.kind === 'unix'
    ? `unix:${e.path}`
    : `${e.secure ? 'https' : 'http'}://${e.address ?? e.host}:${e.port}`;
}
