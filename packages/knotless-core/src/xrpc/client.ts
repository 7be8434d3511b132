import type { HttpRequest, HttpResponse, Transport } from './transport.ts';
import { KnotlessError } from '../errors.ts';
import { isBodySource, type RequestBody } from './request-body.ts';
import { printErr, safeText } from '../text/terminal.ts';
import { NoAnswer, isCertificateFault, unreachable } from './no-answer.ts';
import { isAuthRejection, pdsRefusal } from './pds-errors.ts';
import { isRetrySafe, nextWait, sleep, type Failure, type RetryPolicy } from './retry.ts';
import {
  rateLimitNotice,
  rateLimitSentence,
  rateLimitWait,
  type UploadBudgets,
  type UploadStatus,
} from './rate-limit.ts';

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
  /**
   * Throws when these credentials are no good at `service` and the reason is known (a session made
   * on the PDS its account has since left): asked before each request is authorized.
   */
  checkService?(service: string): void;
}

/** Options for one call. */
export interface CallOptions {
  /** Query parameters; a list is sent as the parameter repeated, once per item (XRPC's arrays). */
  params?: Record<string, string | number | boolean | readonly string[] | undefined>;
  /** JSON-serialisable input, or raw bytes (then `contentType` says what they are). */
  body?: unknown;
  contentType?: string;
  /** Extra headers, e.g. a refresh token's authorization. */
  headers?: Record<string, string>;
  /** Most bytes the answer may have ({@link MAX_ANSWER_BYTES} when absent); a longer one is cut off. */
  maxBytes?: number;
  /** Where a successful answer's body goes instead of memory (see {@link BodySink}). */
  sink?: BodySink;
}

/**
 * Receives a download as it arrives. `restart` is called before every attempt, a retry's included,
 * so that what a failed attempt delivered is thrown away.
 */
export interface BodySink {
  restart(): void;
  write(part: Buffer): void;
}

/** Cap on an XRPC answer unless the call sets its own: JSON answers are kilobytes. */
export const MAX_ANSWER_BYTES = 4 * 1024 * 1024;

/** Options for {@link XrpcClient}. */
export interface XrpcClientOptions {
  transport: Transport;
  authorizer?: Authorizer;
  trace?: boolean;
  /** Retries of transient faults (see retry.ts); none when absent. */
  retry?: RetryPolicy;
  /** Told of each retry, for a caller that was asked to be verbose; retries are silent otherwise. */
  onRetry?: (notice: string) => void;
  /**
   * How a 429 that says until when is met (rate-limit.ts): waited out when that is within `boundMs`,
   * with one line to `notify` first, whatever the request (a 429 wrote nothing). Absent: a 429 is
   * one more transient fault of the retry policy.
   */
  rateLimit?: { boundMs: number; notify: (line: string) => void };
  /**
   * Asked when a request naming an account (a read's `repo=` or `did=`, a write's `repo`) is answered
   * that the account is not served here (deactivated, taken down, deleted or moved): returns the
   * service it lives on now, to send a read there once, or undefined when it has not moved; it may
   * throw a sentence of its own (what became of the account), which is then the request's failure.
   */
  relocate?: (did: string, from: string) => Promise<string | undefined>;
  /**
   * Awaited before a write is sent and before an answer (or a failure) is handed back, never before
   * a read is sent: what a command learnt in parallel with its first request (a cached handle verified
   * afresh, `IdentityResolver.settle`) may still stop it, at no round trip of its own.
   */
  gate?: () => Promise<void>;
  /**
   * Takes the `RateLimit-*` headers of every answer (refusals too), so that an upload can say before
   * it starts that it needs more than the PDS says is left: shared by the clients of one command.
   */
  budgets?: UploadBudgets;
}

/**
 * The account a request names, by DID: a read's `repo` or `did` parameter, a write's `repo` (the
 * JSON body of repo.putRecord, deleteRecord, applyWrites…).
 */
function accountOf(params: CallOptions['params'], body?: unknown): string | undefined {
  const named =
    params?.['repo'] ??
    params?.['did'] ??
    (typeof body === 'object' && body !== null && !(body instanceof Uint8Array)
      ? (body as { repo?: unknown }).repo
      : undefined);
  return typeof named === 'string' && named.startsWith('did:') ? named : undefined;
}

/**
 * A minimal XRPC client over the process's transport. Hand-written rather than @atproto/api's agent because the helper
 * must control connections (keep-alive, extra CAs), count every request, and start in milliseconds;
 * the agent loads every lexicon of the Bluesky app at import.
 */
export class XrpcClient {
  /** Where requests go; a read that finds the account moved follows it (see `relocate`). */
  service: string;
  readonly #opts: XrpcClientOptions;

  constructor(service: string, opts: XrpcClientOptions) {
    this.service = service.replace(/\/+$/, '');
    this.#opts = opts;
  }

  /** Opens a connection to the service now, for a request that follows local work (see Transport). */
  preconnect(): void {
    this.#opts.transport.preconnect?.(new URL(this.service));
  }

  /** What this command's answers said of this service's budget for blob uploads, while it holds. */
  uploadBudget(now = Date.now()): UploadStatus | undefined {
    return this.#opts.budgets?.status(this.service, now);
  }

  /** Calls a query (HTTP GET); `maxBytes` caps its answer. */
  query<T>(nsid: string, params?: CallOptions['params'], maxBytes?: number): Promise<T> {
    return this.call<T>('GET', nsid, {
      ...(params === undefined ? {} : { params }),
      ...(maxBytes === undefined ? {} : { maxBytes }),
    });
  }

  /** Calls a procedure (HTTP POST). */
  procedure<T>(nsid: string, body?: unknown, opts: Omit<CallOptions, 'body'> = {}): Promise<T> {
    return this.call<T>('POST', nsid, { ...opts, body });
  }

  /**
   * Calls a query whose answer is raw bytes (e.g. com.atproto.sync.getBlob), of at most `maxBytes`:
   * the caller knows how big the answer should be, and a longer one is cut off as it arrives.
   */
  async queryBytes(nsid: string, params: CallOptions['params'], maxBytes: number): Promise<Buffer> {
    return this.#following('GET', accountOf(params), () =>
      this.#withRenewal(() => this.#retrying('GET', nsid, { params: params ?? {}, maxBytes }, false)),
    );
  }

  /**
   * Like {@link queryBytes}, but the answer goes to `sink` piece by piece as it arrives (a download
   * written to disk), never whole in memory; returns how many bytes it had.
   */
  async queryInto(
    nsid: string,
    params: CallOptions['params'],
    maxBytes: number,
    sink: BodySink,
  ): Promise<number> {
    let size = 0;
    const counting: BodySink = {
      restart: () => {
        size = 0;
        sink.restart();
      },
      write: (part) => {
        size += part.length;
        sink.write(part);
      },
    };
    await this.#following('GET', accountOf(params), () =>
      this.#withRenewal(() =>
        this.#retrying('GET', nsid, { params: params ?? {}, maxBytes, sink: counting }, false),
      ),
    );
    return size;
  }

  /** Sends one request (retried when safe), renewing credentials once when the server rejects them. */
  async call<T>(method: 'GET' | 'POST', nsid: string, opts: CallOptions): Promise<T> {
    const named = accountOf(opts.params, method === 'POST' ? opts.body : undefined);
    const body = await this.#following(method, named, () =>
      this.#withRenewal(() => this.#retrying(method, nsid, opts, true)),
    );
    return parseJson(body.toString('utf8')) as T;
  }

  /**
   * Sends a request; when the answer says the account it names (`did`) is not served here, asks
   * `relocate` what became of it: a read is sent once more where the account lives now, a write
   * fails with what `relocate` says of the account (a deactivated account's one sentence), else with
   * the PDS's own refusal. A write is never sent again: the session's tokens are the old PDS's.
   */
  async #following<T>(method: 'GET' | 'POST', did: string | undefined, send: () => Promise<T>): Promise<T> {
    const gate = this.#opts.gate;
    if (gate === undefined) return this.#follow(method, did, send);
    if (method === 'POST') await gate();
    let answer: T;
    try {
      answer = await this.#follow(method, did, send);
    } catch (err) {
      // What became of the account (deleted, deactivated) is said over what became of its handle.
      if (!(err instanceof KnotlessError && err.code === 'account-inactive')) await gate();
      throw err;
    }
    await gate();
    return answer;
  }

  async #follow<T>(method: 'GET' | 'POST', did: string | undefined, send: () => Promise<T>): Promise<T> {
    try {
      return await send();
    } catch (err) {
      const relocate = this.#opts.relocate;
      if (relocate === undefined || did === undefined) throw err;
      if (!(err instanceof XrpcError) || pdsRefusal(err) !== 'account-gone') throw err;
      const moved = await relocate(did, this.service);
      if (moved === undefined || method !== 'GET') throw err;
      this.service = moved.replace(/\/+$/, '');
      return send();
    }
  }

  /**
   * Sends until an answer, retrying transient faults with backoff when the request is safe to
   * repeat (retry.ts decides which are). Past the bound, the last fault is thrown as one sentence.
   */
  async #retrying(method: 'GET' | 'POST', nsid: string, opts: CallOptions, json: boolean): Promise<Buffer> {
    const policy = this.#opts.retry;
    const rate = this.#opts.rateLimit;
    const safe = isRetrySafe(method, nsid, opts.body);
    // The budget counts attempts as well as waits, so a PDS that hangs until the transport's timeout
    // is not waited on five times over.
    const started = Date.now();
    // Rate-limit waits have their own bound and count neither against the retries nor their budget.
    let rateWaited = 0;
    let attempt = 0;
    for (let sent = 1; ; sent++) {
      try {
        return await this.#send(method, nsid, opts, json);
      } catch (err) {
        const f = failureOf(err);
        if (rate !== undefined && err instanceof XrpcError && f !== undefined) {
          const verdict = rateLimitWait(f, rateWaited, rate.boundMs);
          if (verdict.waitMs !== undefined) {
            rate.notify(rateLimitNotice(verdict.waitMs, method));
            await sleep(verdict.waitMs);
            rateWaited += verdict.waitMs;
            continue;
          }
          if (verdict.stated) {
            err.attempts = sent;
            throw err;
          }
        }
        // A refused connection never carried the request, so even an unsafe one may go again.
        const again = safe || (err instanceof NoAnswer && err.code === 'ECONNREFUSED');
        const wait =
          policy !== undefined && again && f !== undefined
            ? nextWait(policy, attempt, Date.now() - started - rateWaited, f)
            : undefined;
        if (wait === undefined) {
          if (err instanceof XrpcError || err instanceof NoAnswer) err.attempts = sent;
          throw err instanceof NoAnswer ? unreachable(err) : err;
        }
        const why = err instanceof XrpcError ? `HTTP ${err.status}` : (err as NoAnswer).code;
        const notice = `retrying ${nsid} in ${wait} ms (${why}; attempt ${attempt + 2} of ${policy!.retries + 1})`;
        if (this.#opts.trace) printErr(`knotless: trace ${notice}`);
        this.#opts.onRetry?.(notice);
        await sleep(wait);
        attempt++;
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
      if (Array.isArray(v)) for (const item of v as readonly string[]) url.searchParams.append(k, item);
      else if (v !== undefined) url.searchParams.set(k, String(v));
    this.#opts.authorizer?.checkService?.(this.service);
    const headers: Record<string, string> = { ...(await this.#opts.authorizer?.headers()), ...opts.headers };
    let body: RequestBody = null;
    if (opts.body instanceof Uint8Array || isBodySource(opts.body)) {
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
    let sunk = 0;
    try {
      const maxBytes = opts.maxBytes ?? MAX_ANSWER_BYTES;
      opts.sink?.restart();
      const sink = opts.sink;
      const init: HttpRequest = {
        method,
        headers,
        body,
        maxBytes,
        ...(sink === undefined
          ? {}
          : {
              sink: (part: Buffer) => {
                sunk += part.length;
                sink.write(part);
              },
            }),
      };
      // An authorizer that signs each request itself (DPoP) sends it; else the transport does.
      res =
        auth?.send === undefined ? await this.#opts.transport.request(url, init) : await auth.send(url, init);
    } catch (err) {
      this.#trace(method, nsid, 'failed', started, cpu);
      // The authorizer's own verdict (e.g. the session has expired) is a sentence already.
      if (err instanceof KnotlessError) throw err;
      const c = err as { code?: string; cause?: { code?: string } };
      throw new NoAnswer(url, c.code ?? c.cause?.code ?? String(err), err);
    }
    const ok = res.status >= 200 && res.status < 300;
    // A sender that does not stream (an OAuth session's fetch) hands the body back whole.
    if (ok && opts.sink !== undefined && sunk === 0 && res.body.length > 0) {
      opts.sink.write(res.body);
      sunk = res.body.length;
    }
    const bytes = res.body;
    const received = ok && opts.sink !== undefined ? sunk : bytes.length;
    this.#trace(method, nsid, String(res.status), started, cpu);
    this.#opts.budgets?.observe(this.service, method, nsid, res.status, res.headers);
    // Not followed: an XRPC service is named by its own address, and a hop elsewhere would carry the
    // session's tokens to a server nobody chose.
    if (res.status >= 300 && res.status < 400) {
      throw new KnotlessError(
        'pds-error',
        `${url.origin} answered ${nsid} with a redirect (HTTP ${res.status}), which knotless does not follow; use the PDS's own address (its DID document or KNOTLESS_SERVICE).`,
      );
    }
    // A connection cut mid-body can look like a short answer: a body shorter than announced is none.
    const length = Number(res.headers['content-length'] ?? NaN);
    if (Number.isFinite(length) && length !== received)
      throw new NoAnswer(url, 'ETRUNCATED', new Error(`${received} of ${length} bytes`));
    if (ok) {
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

/** What retry.ts needs to know of a failed attempt; undefined for failures that are not the PDS's. */
function failureOf(err: unknown): Failure | undefined {
  if (err instanceof XrpcError) return { status: err.status, headers: err.headers };
  if (err instanceof NoAnswer && !isCertificateFault(err.code) && !FINAL.has(err.code))
    return { status: undefined, headers: {} };
  return undefined;
}

/**
 * Faults not retried: an answer past its cap would be as long again, and a request that ran out of
 * time has spent it (retrying would multiply the wait).
 */
const FINAL = new Set(['ETOOLARGE', 'EDEADLINE']);

/** Turns the generic failures any call can meet (rate limits, refusals, server faults) into user errors. */
export function generalFailure(err: unknown, what: string): unknown {
  if (!(err instanceof XrpcError)) return err;
  const kind = pdsRefusal(err);
  if (kind === 'rate-limited') {
    return new KnotlessError(
      'rate-limited',
      rateLimitSentence(what, { status: err.status, headers: err.headers }),
      { cause: err },
    );
  }
  if (kind === 'not-permitted') {
    return new KnotlessError(
      'permission-denied',
      `The PDS refused ${what} (${safeText(err.message)}); you can only write to your own account.`,
      { cause: err },
    );
  }
  if (kind === 'too-large') {
    return new KnotlessError(
      'too-large',
      `The PDS refused ${what} as too large (${safeText(err.message)}).`,
      {
        cause: err,
      },
    );
  }
  if (kind === 'server-fault') {
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
