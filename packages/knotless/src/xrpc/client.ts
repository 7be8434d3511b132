import type { HttpResponse, Transport } from './transport.ts';
import { KnotlessError } from '../errors.ts';

/** An error response from an XRPC endpoint: the HTTP status and the body's `error` name. */
export class XrpcError extends Error {
  override name = 'XrpcError';
  readonly status: number;
  readonly error: string;
  readonly headers: Record<string, string | string[] | undefined>;

  constructor(status: number, error: string, message: string, headers: XrpcError['headers'] = {}) {
    super(message);
    this.status = status;
    this.error = error;
    this.headers = headers;
  }
}

/** Supplies credentials for a request and renews them when the server rejects them. */
export interface Authorizer {
  /** Headers that authorize the next request. */
  headers(): Promise<Record<string, string>>;
  /** Renews credentials after a rejection; false when that is impossible (then the rejection stands). */
  renew(rejected: XrpcError): Promise<boolean>;
}

/** Options for one call. */
export interface CallOptions {
  params?: Record<string, string | number | boolean | undefined>;
  /** JSON-serialisable input, or raw bytes (then `contentType` says what they are). */
  body?: unknown;
  contentType?: string;
  /** Extra headers, e.g. a refresh token's authorization. */
  headers?: Record<string, string>;
}

/** Options for {@link XrpcClient}. */
export interface XrpcClientOptions {
  transport: Transport;
  authorizer?: Authorizer;
  trace?: boolean;
}

/**
 * A minimal XRPC client over the process's transport. Hand-written rather than @atproto/api's agent because the helper
 * must control connections (keep-alive, extra CAs), count every request, and start in milliseconds;
 * the agent loads every lexicon of the Bluesky app at import.
 */
export class XrpcClient {
  readonly service: string;
  readonly #opts: XrpcClientOptions;

  constructor(service: string, opts: XrpcClientOptions) {
    this.service = service.replace(/\/+$/, '');
    this.#opts = opts;
  }

  /** Calls a query (HTTP GET). */
  query<T>(nsid: string, params?: CallOptions['params']): Promise<T> {
    return this.call<T>('GET', nsid, params === undefined ? {} : { params });
  }

  /** Calls a procedure (HTTP POST). */
  procedure<T>(nsid: string, body?: unknown, opts: Omit<CallOptions, 'body'> = {}): Promise<T> {
    return this.call<T>('POST', nsid, { ...opts, body });
  }

  /** Calls a query whose answer is raw bytes (e.g. com.atproto.sync.getBlob). */
  async queryBytes(nsid: string, params: CallOptions['params']): Promise<Buffer> {
    return this.#withRenewal(() => this.#send('GET', nsid, { params: params ?? {} }));
  }

  /** Sends one request, renewing credentials once when the server rejects them. */
  async call<T>(method: 'GET' | 'POST', nsid: string, opts: CallOptions): Promise<T> {
    const body = await this.#withRenewal(() => this.#send(method, nsid, opts));
    return parseJson(body.toString('utf8')) as T;
  }

  async #withRenewal<T>(send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (err) {
      const auth = this.#opts.authorizer;
      if (err instanceof XrpcError && auth !== undefined && isAuthRejection(err) && (await auth.renew(err))) {
        return send();
      }
      throw err;
    }
  }

  async #send(method: 'GET' | 'POST', nsid: string, opts: CallOptions): Promise<Buffer> {
    const url = new URL(`${this.service}/xrpc/${nsid}`);
    for (const [k, v] of Object.entries(opts.params ?? {}))
      if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = { ...(await this.#opts.authorizer?.headers()), ...opts.headers };
    let body: Uint8Array | string | null = null;
    if (opts.body instanceof Uint8Array) {
      body = opts.body;
      headers['content-type'] = opts.contentType ?? 'application/octet-stream';
    } else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    const started = performance.now();
    let res: HttpResponse;
    try {
      res = await this.#opts.transport.request(url, { method, headers, body });
    } catch (err) {
      this.#trace(method, nsid, 'failed', started);
      throw unreachable(url, err);
    }
    const bytes = res.body;
    this.#trace(method, nsid, String(res.status), started);
    if (res.status >= 200 && res.status < 300) return bytes;
    const text = bytes.toString('utf8');
    const e = (parseJson(text) ?? {}) as { error?: unknown; message?: unknown };
    throw new XrpcError(
      res.status,
      typeof e.error === 'string' ? e.error : `HTTP${res.status}`,
      typeof e.message === 'string' ? e.message : text.slice(0, 200),
      res.headers,
    );
  }

  #trace(method: string, nsid: string, outcome: string, started: number): void {
    if (!this.#opts.trace) return;
    const ms = Math.round(performance.now() - started);
    // "sent at" is milliseconds since the process started: the first one measures start-up.
    const at = Math.round(started);
    process.stderr.write(
      `knotless: trace ${method} ${this.service} ${nsid} ${outcome} ${ms}ms (sent at ${at}ms)\n`,
    );
  }
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** True when the server refused the credentials themselves (expired or unknown token). */
export function isAuthRejection(err: XrpcError): boolean {
  return err.status === 401 || err.error === 'ExpiredToken' || err.error === 'InvalidToken';
}

function unreachable(url: URL, cause: unknown): KnotlessError {
  const c = cause as { code?: string; cause?: { code?: string } };
  const code = c.code ?? c.cause?.code ?? String(cause);
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) {
    return new KnotlessError(
      'pds-unreachable',
      `${url.origin} presented a certificate that is not trusted (${code}); if you run that server, name its CA in KNOTLESS_CA_CERTS.`,
      { cause },
    );
  }
  return new KnotlessError(
    'pds-unreachable',
    `Could not reach ${url.origin} (${code}); check your connection or the server's status, then try again.`,
    { cause },
  );
}

/** Turns the generic failures any call can meet (rate limits, server faults) into user errors. */
export function generalFailure(err: unknown, what: string): unknown {
  if (!(err instanceof XrpcError)) return err;
  if (err.status === 429) {
    const reset = Number(err.headers['ratelimit-reset']);
    const when = Number.isFinite(reset) && reset > 0 ? ` until ${new Date(reset * 1000).toISOString()}` : '';
    return new KnotlessError('rate-limited', `The PDS is rate-limiting ${what}${when}; wait and try again.`, {
      cause: err,
    });
  }
  if (
    err.status === 403 ||
    err.error === 'AuthMissing' ||
    (err.error === 'InvalidRequest' && /auth/i.test(err.message))
  ) {
    return new KnotlessError(
      'permission-denied',
      `The PDS refused ${what} (${err.message}); you can only write to your own account.`,
      { cause: err },
    );
  }
  return new KnotlessError('pds-error', `The PDS failed ${what}: ${err.error}: ${err.message}.`, {
    cause: err,
  });
}
