// HTTP/1.1 message framing (RFC 9112), as much as a client of one JSON/binary API needs: request heads,
// response heads, and bodies delimited by Content-Length, chunked coding, or the connection's close.
// Pure functions over buffers, so they are tested without sockets.

/** Response header values by lower-case name; repeated headers are joined with ", ". */
export type ResponseHeaders = Record<string, string | undefined>;

/** A parsed status line and header block. */
export interface ResponseHead {
  status: number;
  /** The minor version of the status line: 0 for HTTP/1.0 (never kept alive), 1 for HTTP/1.1. */
  minor: number;
  headers: ResponseHeaders;
  /** Bytes the head took, blank line included. */
  length: number;
}

const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');
/** Longest response head accepted, as Node's own parser does (16 KiB). */
export const MAX_HEAD_BYTES = 16 * 1024;

/** Thrown on bytes that are not an HTTP/1.1 response; the connection cannot be used further. */
export class HttpParseError extends Error {
  readonly code = 'HPE_INVALID';
}

/** Thrown when a body grows, or is announced, past the caller's cap; the connection is dropped. */
export class BodyTooLarge extends Error {
  readonly code = 'ETOOLARGE';
  readonly limit: number;

  constructor(limit: number) {
    super(`the answer is larger than the ${limit} bytes allowed for it`);
    this.limit = limit;
  }
}

/** Most hex digits a chunk size may have: 12 is 256 TiB, far past any cap, and exact in a double. */
const MAX_CHUNK_DIGITS = 12;

/** The request line and headers, ready to write before the body. */
export function writeRequestHead(
  method: string,
  target: string,
  headers: Record<string, string>,
  bodyLength: number | null,
): Buffer {
  let head = `${method} ${target} HTTP/1.1\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    if (/[\r\n]/.test(name) || /[\r\n]/.test(value))
      throw new TypeError(`header ${JSON.stringify(name)} holds a line break`);
    head += `${name}: ${value}\r\n`;
  }
  if (bodyLength !== null) head += `content-length: ${bodyLength}\r\n`;
  return Buffer.from(`${head}\r\n`, 'latin1');
}

/** Parses a response head at the start of `buf`; undefined while it is incomplete. */
export function parseResponseHead(buf: Buffer): ResponseHead | undefined {
  const end = buf.indexOf(HEAD_END);
  if (end < 0) {
    if (buf.length > MAX_HEAD_BYTES) throw new HttpParseError('response head too long');
    return undefined;
  }
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.([01]) (\d{3})(?: |$)/.exec(lines[0] ?? '');
  if (status === null) throw new HttpParseError(`not an HTTP/1.1 status line: ${JSON.stringify(lines[0])}`);
  const headers: ResponseHeaders = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw new HttpParseError(`malformed header line: ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    const prior = headers[name];
    headers[name] = prior === undefined ? value : `${prior}, ${value}`;
  }
  return { status: Number(status[2]), minor: Number(status[1]), headers, length: end + HEAD_END.length };
}

/** How a response's body ends. */
export type BodyFraming =
  { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'close' };

/** Decides a response body's framing from the request method and the response head. */
export function bodyFraming(method: string, head: ResponseHead): BodyFraming {
  if (method === 'HEAD' || head.status === 204 || head.status === 304 || head.status < 200)
    return { kind: 'none' };
  const coding = head.headers['transfer-encoding'];
  if (coding !== undefined) {
    // Nothing but chunked is asked for (no TE header is sent); it overrides any Content-Length.
    if (!/^\s*chunked\s*$/i.test(coding))
      throw new HttpParseError(`unsupported transfer-encoding ${JSON.stringify(coding)}`);
    return { kind: 'chunked' };
  }
  const length = head.headers['content-length'];
  if (length !== undefined) {
    // Repeated headers arrive joined with ", ": identical copies are one length, differing ones a
    // smuggling attempt or a broken server (RFC 9112 §6.3).
    const values = new Set(length.split(',').map((v) => v.trim()));
    const [only] = values;
    if (values.size !== 1 || only === undefined || !/^\d{1,15}$/.test(only))
      throw new HttpParseError(`bad content-length ${JSON.stringify(length.slice(0, 100))}`);
    return { kind: 'length', length: Number(only) };
  }
  return { kind: 'close' };
}

/** What a {@link BodyDecoder} does with the body: its cap, and where its bytes go. */
export interface BodyOptions {
  /** Most body bytes accepted; an announced or growing body past it throws {@link BodyTooLarge}. */
  max?: number;
  /**
   * Receives each piece of the body as it arrives (then nothing is kept in memory). A piece is valid
   * only during the call.
   */
  sink?: (part: Buffer) => void;
}

/**
 * Collects a body as bytes arrive. `push` returns the bytes left over past the body's end (the next
 * response's), or undefined while the body is still incomplete.
 */
export class BodyDecoder {
  readonly #framing: BodyFraming;
  readonly #parts: Buffer[] = [];
  readonly #max: number;
  readonly #sink: ((part: Buffer) => void) | undefined;
  #size = 0;
  #pending = Buffer.alloc(0);
  #remaining: number;
  #done: boolean;

  constructor(framing: BodyFraming, opts: BodyOptions = {}) {
    this.#framing = framing;
    this.#max = opts.max ?? Infinity;
    this.#sink = opts.sink;
    // An announced length past the cap is refused before a byte of the body is read.
    if (framing.kind === 'length' && framing.length > this.#max) throw new BodyTooLarge(this.#max);
    this.#remaining = framing.kind === 'length' ? framing.length : 0;
    this.#done = framing.kind === 'none' || (framing.kind === 'length' && framing.length === 0);
  }

  /** True when the whole body has arrived. */
  get done(): boolean {
    return this.#done;
  }

  /** Body bytes received so far. */
  get size(): number {
    return this.#size;
  }

  /** The body so far (all of it once `done`); empty when a sink took it. */
  body(): Buffer {
    return Buffer.concat(this.#parts);
  }

  /** Feeds bytes; returns what lies past the body once it is complete. */
  push(data: Buffer): Buffer | undefined {
    if (this.#done) return data;
    if (this.#framing.kind === 'close') {
      this.#emit(data);
      return undefined;
    }
    if (this.#framing.kind === 'length') {
      const take = Math.min(this.#remaining, data.length);
      this.#emit(data.subarray(0, take));
      this.#remaining -= take;
      if (this.#remaining > 0) return undefined;
      this.#done = true;
      return data.subarray(take);
    }
    return this.#pushChunked(data);
  }

  /** Marks the connection's end: completes a close-delimited body, else reports truncation. */
  end(): boolean {
    if (this.#framing.kind === 'close') this.#done = true;
    return this.#done;
  }

  #emit(part: Buffer): void {
    if (part.length === 0) return;
    this.#size += part.length;
    if (this.#size > this.#max) throw new BodyTooLarge(this.#max);
    if (this.#sink !== undefined) this.#sink(part);
    // A copy: the piece may be a view of a buffer its reader reuses (http1.ts reads into one).
    else this.#parts.push(Buffer.from(part));
  }

  #pushChunked(data: Buffer): Buffer | undefined {
    let buf = this.#pending.length === 0 ? data : Buffer.concat([this.#pending, data]);
    for (;;) {
      if (this.#remaining > 0) {
        // Inside a chunk's data; its trailing CRLF is counted in #remaining (+2).
        const take = Math.min(this.#remaining, buf.length);
        const dataPart = Math.min(take, Math.max(0, this.#remaining - 2));
        this.#emit(buf.subarray(0, dataPart));
        // A chunk longer than its size line said would otherwise be read as the next size line.
        for (let i = dataPart; i < take; i++)
          if (buf[i] !== CRLF[2 - (this.#remaining - i)])
            throw new HttpParseError('chunk longer than its size');
        this.#remaining -= take;
        buf = buf.subarray(take);
        if (this.#remaining > 0) break;
        continue;
      }
      const eol = buf.indexOf(CRLF);
      if (eol < 0) {
        if (buf.length > 1024) throw new HttpParseError('chunk size line too long');
        break;
      }
      const size = /^([0-9a-fA-F]+)[ \t]*(;.*)?$/.exec(buf.subarray(0, eol).toString('latin1'));
      if (size === null || size[1]!.length > MAX_CHUNK_DIGITS)
        throw new HttpParseError('bad chunk size line');
      const n = parseInt(size[1]!, 16);
      if (n === 0) {
        // The last chunk; skip any trailer fields up to the blank line.
        const trailerEnd = buf.indexOf(CRLF, eol + 2) === eol + 2 ? eol + 4 : buf.indexOf(HEAD_END, eol) + 4;
        if (trailerEnd < 4) {
          if (buf.length > MAX_HEAD_BYTES) throw new HttpParseError('chunked trailer too long');
          break;
        }
        this.#done = true;
        this.#pending = Buffer.alloc(0);
        return buf.subarray(trailerEnd);
      }
      // A chunk announced past the cap is refused before its data is read.
      if (this.#size + n > this.#max) throw new BodyTooLarge(this.#max);
      this.#remaining = n + 2;
      buf = buf.subarray(eol + 2);
    }
    this.#pending = Buffer.from(buf);
    return undefined;
  }
}
