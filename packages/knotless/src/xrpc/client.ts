import type { HttpRequest, HttpResponse, Transport } from './transport.ts';
import { KnotlessError } from '../errors.ts';
import { printErr, safeText } from '../text/terminal.ts';
import { isRetrySafe, nextWait, serverWaitMs, sleep, type Failure, type RetryPolicy } from './retry.ts';

/** An error response from an XRPC endpoint: the HTTP status and the body's `error` name. */
export class XrpcError extends Error {
  override name = 'XrpcError';
  readonly status: number;
  readonly error: string;
  readonly headers: Record<string, string | string[] | undefined>;
  /** How many times the request was sent before this answer was given up on. */
  attempts = 1;

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
  /**
   * Sends the request itself, when authorizing it takes more than headers (OAuth's DPoP proofs sign
   * each request's method and URL, and the server may ask for a new nonce); absent for bearer tokens.
   */
  send?(url: URL, init: HttpRequest): Promise<HttpResponse>;
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
  /** Retries of transient faults (see retry.ts); none when absent. */
  retry?: RetryPolicy;
  /** Told of each retry, for a caller that was asked to be verbose; retries are silent otherwise. */
  onRetry?: (notice: string) => void;
}

/** A request that got no usable answer: refused, reset, timed out, or cut mid-body. */
class NoAnswer extends Error {
  readonly url: URL;
  readonly code: string;
  attempts = 1;

  constructor(url: URL, code: string, cause: unknown) {
    super(code, { cause });
    this.url = url;
    this.code = code;
  }
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
    return this.#withRenewal(() => this.#retrying('GET', nsid, { params: params ?? {} }, false));
  }

  /** Sends one request (retried when safe), renewing credentials once when the server rejects them. */
  async call<T>(method: 'GET' | 'POST', nsid: string, opts: CallOptions): Promise<T> {
    const body = await this.#withRenewal(() => this.#retrying(method, nsid, opts, true));
    return parseJson(body.toString('utf8')) as T;
  }

  /**
   * Sends until an answer, retrying transient faults with backoff when the request is safe to
   * repeat (retry.ts decides which are). Past the bound, the last fault is thrown as one sentence.
   */
  async #retrying(method: 'GET' | 'POST', nsid: string, opts: CallOptions, json: boolean): Promise<Buffer> {
    const policy = this.#opts.retry;
    const safe = isRetrySafe(method, nsid, opts.body);
    // The budget counts attempts as well as waits, so a PDS that hangs until the transport's timeout
    // is not waited on five times over.
    const started = Date.now();
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#send(method, nsid, opts, json);
      } catch (err) {
        const f = failureOf(err);
        // A refused connection never carried the request, so even an unsafe one may go again.
        const again = safe || (err instanceof NoAnswer && err.code === 'ECONNREFUSED');
        const wait =
          policy !== undefined && again && f !== undefined
            ? nextWait(policy, attempt, Date.now() - started, f)
            : undefined;
        if (wait === undefined) {
          if (err instanceof XrpcError || err instanceof NoAnswer) err.attempts = attempt + 1;
          throw err instanceof NoAnswer ? unreachable(err) : err;
        }
        const why = err instanceof XrpcError ? `HTTP ${err.status}` : (err as NoAnswer).code;
        const notice = `retrying ${nsid} in ${wait} ms (${why}; attempt ${attempt + 2} of ${policy!.retries + 1})`;
        if (this.#opts.trace) printErr(`knotless: trace ${notice}`);
        this.#opts.onRetry?.(notice);
        await sleep(wait);
      }
    }
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

  async #send(method: 'GET' | 'POST', nsid: string, opts: CallOptions, json: boolean): Promise<Buffer> {
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
    // process.uptime, not performance.now: the performance global loads perf_hooks (a few ms).
    const started = process.uptime() * 1000;
    const cpu = this.#opts.trace ? process.cpuUsage() : undefined;
    let res: HttpResponse;
    const auth = this.#opts.authorizer;
    try {
      res =
        auth?.send === undefined
          ? await this.#opts.transport.request(url, { method, headers, body })
          : await auth.send(url, { method, headers, body });
    } catch (err) {
      this.#trace(method, nsid, 'failed', started, cpu);
      // The authorizer's own verdict (e.g. the session has expired) is a sentence already.
      if (err instanceof KnotlessError) throw err;
      const c = err as { code?: string; cause?: { code?: string } };
      throw new NoAnswer(url, c.code ?? c.cause?.code ?? String(err), err);
    }
    const bytes = res.body;
    this.#trace(method, nsid, String(res.status), started, cpu);
    // A connection cut mid-body can look like a short answer: a body shorter than announced is none.
    const length = Number(res.headers['content-length'] ?? NaN);
    if (Number.isFinite(length) && length !== bytes.length)
      throw new NoAnswer(url, 'ETRUNCATED', new Error(`${bytes.length} of ${length} bytes`));
    if (res.status >= 200 && res.status < 300) {
      if (json && bytes.length > 0 && parseJson(bytes.toString('utf8')) === undefined)
        throw new NoAnswer(url, 'EBADANSWER', new Error('the answer is not JSON'));
      return bytes;
    }
    const text = bytes.toString('utf8');
    const e = (parseJson(text) ?? {}) as { error?: unknown; message?: unknown };
    throw new XrpcError(
      res.status,
      typeof e.error === 'string' ? e.error : `HTTP${res.status}`,
      typeof e.message === 'string' ? e.message : text.slice(0, 200),
      res.headers,
    );
  }

  #trace(method: string, nsid: string, outcome: string, started: number, cpu?: NodeJS.CpuUsage): void {
    if (!this.#opts.trace) return;
    const ms = Math.round(process.uptime() * 1000 - started);
    // "sent at" is milliseconds since the process started: the first one measures start-up.
    const at = Math.round(started);
    // CPU time spent by then: unlike the clock, it hardly depends on what else the machine is doing.
    const spent = cpu === undefined ? '' : `, cpu ${Math.round((cpu.user + cpu.system) / 1000)}ms`;
    printErr(
      `knotless: trace ${method} ${this.service} ${nsid} ${outcome} ${ms}ms (sent at ${at}ms${spent})`,
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

/** What retry.ts needs to know of a failed attempt; undefined for failures that are not the PDS's. */
function failureOf(err: unknown): Failure | undefined {
  if (err instanceof XrpcError) return { status: err.status, headers: err.headers };
  if (err instanceof NoAnswer && !isCertificateFault(err.code)) return { status: undefined, headers: {} };
  return undefined;
}

function isCertificateFault(code: string): boolean {
  return /CERT|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code);
}

function unreachable(err: NoAnswer): KnotlessError {
  const { url, code } = err;
  const cause = err.cause;
  if (isCertificateFault(code)) {
    return new KnotlessError(
      'pds-unreachable',
      `${url.origin} presented a certificate that is not trusted (${code}); if you run that server, name its CA in KNOTLESS_CA_CERTS.`,
      { cause },
    );
  }
  const tries = err.attempts > 1 ? ` after ${err.attempts} attempts` : '';
  if (code === 'ETRUNCATED' || code === 'EBADANSWER') {
    return new KnotlessError(
      'pds-error',
      `${url.origin} sent answers cut short or unreadable (${code})${tries}; it may be failing, try again later.`,
      { cause },
    );
  }
  return new KnotlessError(
    'pds-unreachable',
    `Could not reach ${url.origin} (${code})${tries}; check your connection or the server's status, then try again.`,
    { cause },
  );
}

/** Turns the generic failures any call can meet (rate limits, server faults) into user errors. */
export function generalFailure(err: unknown, what: string): unknown {
  if (!(err instanceof XrpcError)) return err;
  if (err.status === 429) {
    const wait = serverWaitMs({ status: err.status, headers: err.headers });
    const when = wait === undefined ? '' : ` until ${new Date(Date.now() + wait).toISOString()}`;
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
      `The PDS refused ${what} (${safeText(err.message)}); you can only write to your own account.`,
      { cause: err },
    );
  }
  if (err.status >= 500) {
    const tries = err.attempts > 1 ? ` ${err.attempts} times` : '';
    return new KnotlessError(
      'pds-error',
      `The PDS failed ${what}${tries} (HTTP ${err.status} ${safeText(err.error, 100)}); it may be down, try again later.`,
      { cause: err },
    );
  }
  // The PDS's own words are quoted, escaped: a hostile server must not write to the terminal.
  return new KnotlessError(
    'pds-error',
    `The PDS failed ${what}: ${safeText(err.error, 100)}: ${safeText(err.message)}.`,
    {
      cause: err,
    },
  );
}
