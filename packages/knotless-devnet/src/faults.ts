import type http from 'node:http';

/** What the proxy does instead of (or to) one request. */
export type Fault =
  /** Close the client's connection without an answer. */
  | { kind: 'drop' }
  /** Wait, then forward as usual. */
  | { kind: 'delay'; ms: number }
  /**
   * Hold the request until `until` settles, then forward as usual: orders a request after an event
   * (a compaction landing while a clone waits on a blob) without guessing a delay.
   */
  | { kind: 'hold'; until: Promise<unknown> }
  /** Answer with this status (5xx by default) and an XRPC error body; nothing is forwarded. */
  | { kind: 'status'; status: number; error?: string; message?: string; headers?: Record<string, string> }
  /** Answer 429 with `Retry-After: seconds` and the ratelimit headers the PDS sends; nothing is forwarded. */
  | { kind: 'rate-limit'; retryAfter: number }
  /**
   * Forward as usual, and send the answer with these headers set (over the PDS's own of the same
   * names): a PDS stating a rate-limit budget (`ratelimit-remaining`…), or lying about one.
   */
  | { kind: 'headers'; headers: Record<string, string> }
  /** Forward, then send the answer's headers and only its first `bytes` bytes, and cut the connection. */
  | { kind: 'cut'; bytes: number }
  /**
   * Forward (the request is carried out), then send the answer one byte every `everyMs`: a write
   * that lands and whose answer ends later than the client's time limit.
   */
  | { kind: 'slow-answer'; everyMs: number }
  /** Answer 200 with these bytes, as a hostile or broken PDS would; nothing is forwarded. */
  | { kind: 'replace'; body: Uint8Array; contentType?: string }
  /**
   * Answer 200 and stream `bytes` bytes (default 10 GB) as fast as the client reads, framed by a
   * Content-Length (`framing: 'length'`, the default), chunked, or the connection's close; nothing is
   * forwarded. `onSent` is told how many body bytes went out once the connection ends.
   */
  | {
      kind: 'flood';
      bytes?: number;
      framing?: 'length' | 'chunked' | 'close';
      onSent?: (bytes: number) => void;
    }
  /**
   * Answer 200 announcing `length` bytes (default 1 MB), then send one byte every `everyMs` (0: none
   * at all) and never finish; nothing is forwarded.
   */
  | { kind: 'trickle'; everyMs: number; length?: number };

/** A scripted fault: which requests it hits, and what happens to them. */
export interface FaultRule {
  /** The XRPC method to match (any when absent). */
  nsid?: string;
  /** The HTTP method to match (any when absent). */
  method?: string;
  /** Hit the n-th matching request (1-based) and the `times - 1` after it; default 1. */
  nth?: number;
  /** How many matching requests to hit from the n-th on; default 1, Infinity for all. */
  times?: number;
  fault: Fault;
}

/** A rule and how many matching requests it has seen. */
interface Armed {
  rule: FaultRule;
  seen: number;
}

/** A record of a fault that fired, for assertions. */
export interface FiredFault {
  nsid: string | undefined;
  kind: Fault['kind'];
}

/** The faults scripted on one proxy: matches requests to rules, in the order the rules were added. */
export class FaultScript {
  readonly #armed: Armed[] = [];
  readonly fired: FiredFault[] = [];

  add(rule: FaultRule): void {
    this.#armed.push({ rule, seen: 0 });
  }

  clear(): void {
    this.#armed.length = 0;
    this.fired.length = 0;
  }

  /** The fault for this request, if a rule hits it; every matching rule counts the request. */
  pick(method: string, nsid: string | undefined): Fault | undefined {
    let hit: Fault | undefined;
    for (const a of this.#armed) {
      const r = a.rule;
      if ((r.nsid !== undefined && r.nsid !== nsid) || (r.method !== undefined && r.method !== method))
        continue;
      const n = ++a.seen;
      const first = r.nth ?? 1;
      if (hit === undefined && n >= first && n < first + (r.times ?? 1)) hit = r.fault;
    }
    if (hit !== undefined) this.fired.push({ nsid, kind: hit.kind });
    return hit;
  }
}

/** Answers a request with a fault that needs no upstream; returns the status sent (0: none). */
export function answerFault(
  fault: Fault,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): number | undefined {
  const json = (status: number, body: object, headers: Record<string, string> = {}) => {
    req.resume();
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    return status;
  };
  switch (fault.kind) {
    case 'drop':
      req.socket.destroy();
      return 0;
    case 'status':
      return json(
        fault.status,
        { error: fault.error ?? 'InternalServerError', message: fault.message ?? 'injected fault' },
        fault.headers,
      );
    case 'rate-limit': {
      const reset = Math.ceil(Date.now() / 1000 + fault.retryAfter);
      return json(
        429,
        { error: 'RateLimitExceeded', message: 'Rate Limit Exceeded' },
        {
          'retry-after': String(fault.retryAfter),
          'ratelimit-limit': '100',
          'ratelimit-remaining': '0',
          'ratelimit-reset': String(reset),
          'ratelimit-policy': '100;w=3600',
        },
      );
    }
    case 'replace':
      req.resume();
      res
        .writeHead(200, {
          'content-type': fault.contentType ?? 'application/octet-stream',
          'content-length': String(fault.body.length),
        })
        .end(fault.body);
      return 200;
    case 'flood':
      req.resume();
      floodAnswer(res, fault.bytes ?? 10e9, fault.framing ?? 'length', fault.onSent);
      return 200;
    case 'trickle': {
      req.resume();
      const length = fault.length ?? 1_000_000;
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(length) });
      res.flushHeaders();
      if (fault.everyMs <= 0) return 200;
      let sent = 0;
      const timer = setInterval(() => {
        if (res.destroyed || ++sent >= length) return clearInterval(timer);
        res.write(' ');
      }, fault.everyMs);
      res.on('close', () => clearInterval(timer));
      return 200;
    }
    default:
      return undefined;
  }
}

/** Sends `up`'s answer on to `res` one byte every `everyMs`, stopping when the client leaves. */
export function slowAnswer(up: http.IncomingMessage, res: http.ServerResponse, everyMs: number): void {
  whole(up, res, (body) => {
    res.flushHeaders();
    let sent = 0;
    const timer = setInterval(() => {
      if (res.destroyed) return clearInterval(timer);
      res.write(body.subarray(sent, sent + 1));
      if (++sent >= body.length) {
        clearInterval(timer);
        res.end();
      }
    }, everyMs);
    res.on('close', () => clearInterval(timer));
  });
}

/** Reads `up`'s whole answer, writes its status and headers (with its length) to `res`, then `then`. */
function whole(up: http.IncomingMessage, res: http.ServerResponse, then: (body: Buffer) => void): void {
  const chunks: Buffer[] = [];
  up.on('data', (c: Buffer) => chunks.push(c));
  up.on('end', () => {
    const body = Buffer.concat(chunks);
    const headers = { ...up.headers, 'content-length': String(body.length) };
    delete headers['transfer-encoding'];
    delete headers['connection'];
    res.writeHead(up.statusCode ?? 200, headers);
    then(body);
  });
}

/** Streams `total` body bytes as fast as the client takes them, stopping when it leaves. */
function floodAnswer(
  res: http.ServerResponse,
  total: number,
  framing: 'length' | 'chunked' | 'close',
  onSent?: (bytes: number) => void,
): void {
  const piece = Buffer.alloc(64 * 1024, 0x78);
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
  if (framing === 'length') headers['content-length'] = String(total);
  // Node's server chunks a body without a length unless told the connection closes after it.
  if (framing === 'close') {
    headers['connection'] = 'close';
    res.useChunkedEncodingByDefault = false;
  }
  res.writeHead(200, headers);
  let sent = 0;
  res.on('close', () => onSent?.(sent));
  const pump = (): void => {
    while (!res.destroyed && sent < total) {
      const n = Math.min(piece.length, total - sent);
      sent += n;
      if (!res.write(piece.subarray(0, n))) return void res.once('drain', pump);
    }
    if (!res.destroyed) res.end();
  };
  pump();
}

/** Sends an upstream answer's headers and its first `bytes` bytes, then cuts the connection. */
export function cutAnswer(up: http.IncomingMessage, res: http.ServerResponse, bytes: number): void {
  whole(up, res, (body) =>
    res.write(body.subarray(0, Math.min(bytes, Math.max(0, body.length - 1))), () => res.socket?.destroy()),
  );
}
