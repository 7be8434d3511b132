import type * as Net from 'node:net';
import type * as Tls from 'node:tls';
import {
  BodyDecoder,
  bodyFraming,
  parseResponseHead,
  writeRequestHead,
  type ResponseHead,
  type ResponseHeaders,
} from './http1-codec.ts';

// Why a hand-written HTTP/1.1 client: every git command starts the helper afresh, and its start-up is
// on the critical path of each push and fetch. node:http costs about 7 ms of module loading before
// the first byte is sent, Node's bundled fetch (undici) about 30 ms, the undici package 100 ms; node:net
// is loaded by Node's own bootstrap for stdio. The client needs only request/response with bodies in
// memory, keep-alive and TLS, which fits in this file and http1-codec.ts.

/** Where a connection goes: a TCP host and port (TLS when secure), or a Unix socket. */
export type Endpoint =
  | { kind: 'tcp'; host: string; port: number; secure: boolean; address?: string }
  | { kind: 'unix'; path: string };

/** One request, body in memory. */
export interface Http1Request {
  method: string;
  /** Path and query, e.g. `/xrpc/com.atproto.repo.listRecords?repo=...`. */
  target: string;
  headers: Record<string, string>;
  body: Uint8Array | string | null;
}

/** A complete response. */
export interface Http1Response {
  status: number;
  headers: ResponseHeaders;
  body: Buffer;
}

/** An error from the connection, with a Node-style `code` (ECONNREFUSED, ETIMEDOUT, ...). */
export type ConnectionError = Error & { code?: string };

/** Milliseconds to wait for a connection, then for each stretch of silence. */
const TIMEOUT_MS = 30_000;

const net = process.getBuiltinModule('node:net');

/** Keep-alive connections by endpoint; requests in parallel each get a connection of their own. */
export class Http1Pool {
  /** Idle connections by endpoint, each with the function that takes it back out of the pool. */
  readonly #idle = new Map<string, { socket: Net.Socket; unpark: () => void }[]>();
  readonly #ca: string[] | undefined;
  #closed = false;

  /** `ca` replaces the trusted certificates of TLS connections (Node's roots plus the user's). */
  constructor(ca?: string[]) {
    this.#ca = ca;
  }

  /** Sends a request, reusing an idle connection when there is one. */
  async request(endpoint: Endpoint, req: Http1Request): Promise<Http1Response> {
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
    return this.#exchange(this.#connect(endpoint), key, req, false);
  }

  /** Closes idle connections; requests in flight finish. */
  close(): void {
    this.#closed = true;
    for (const sockets of this.#idle.values()) for (const s of sockets) s.socket.destroy();
    this.#idle.clear();
  }

  #connect(endpoint: Endpoint): Net.Socket {
    if (endpoint.kind === 'unix') return net.connect({ path: endpoint.path });
    const host = endpoint.address ?? endpoint.host;
    if (!endpoint.secure) return net.connect({ host, port: endpoint.port, noDelay: true });
    // node:tls loads on the first https request: a dev network on http never pays for it.
    const tls: typeof Tls = process.getBuiltinModule('node:tls');
    const socket = tls.connect({
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
      const finish = (err: ConnectionError | undefined, res?: Http1Response): void => {
        socket.off('data', onData);
        socket.off('error', onError);
        socket.off('close', onClose);
        socket.off('timeout', onTimeout);
        if (err !== undefined) {
          socket.destroy();
          reject(reused && received === 0 ? new StaleConnection(err) : err);
        } else resolve(res!);
      };
      // Once the answer has begun, a lost connection means a cut answer, not an unreachable server.
      const cut = (why: string): ConnectionError =>
        Object.assign(new Error(`the answer was cut short (${why})`), { code: 'ETRUNCATED' });
      const onError = (err: ConnectionError): void =>
        finish(head === undefined ? err : cut(err.code ?? err.message));
      const onTimeout = (): void => finish(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' }));
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
        if (keep && rest.length === 0 && !this.#closed) this.#park(socket, key);
        else socket.destroy();
      };
      const onData = (data: Buffer): void => {
        received += data.length;
        try {
          if (decoder === undefined) {
            buf = buf.length === 0 ? data : Buffer.concat([buf, data]);
            head = parseResponseHead(buf);
            if (head === undefined) return;
            // An interim 1xx response (100 Continue) precedes the real one.
            if (head.status < 200) {
              buf = buf.subarray(head.length);
              head = undefined;
              return onData(Buffer.alloc(0));
            }
            decoder = new BodyDecoder(bodyFraming(req.method, head));
            data = buf.subarray(head.length);
          }
          const rest = decoder.push(data);
          if (rest !== undefined) complete(rest, !/\bclose\b/i.test(head!.headers['connection'] ?? ''));
        } catch (err) {
          finish(err as Error);
        }
      };
      socket.setTimeout(TIMEOUT_MS);
      socket.ref();
      socket.on('data', onData);
      socket.on('error', onError);
      socket.on('close', onClose);
      socket.on('timeout', onTimeout);
      const body = req.body === null ? null : typeof req.body === 'string' ? Buffer.from(req.body) : req.body;
      // A POST without a body still says so, or a server would wait for one.
      const length = body === null ? (req.method === 'GET' || req.method === 'HEAD' ? null : 0) : body.length;
      try {
        socket.write(writeRequestHead(req.method, req.target, req.headers, length));
        if (body !== null && body.length > 0) socket.write(body);
      } catch (err) {
        finish(err as Error);
      }
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
      socket.off('data', drop);
    };
    const entry = { socket, unpark };
    list.push(entry);
    this.#idle.set(key, list);
    socket.on('close', drop);
    socket.on('error', drop);
    socket.on('data', drop);
  }
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
