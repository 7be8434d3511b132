import type * as Http from 'node:http';

// Request bodies for the HTTP client (http-pool.ts): in memory, or streamed from a file.

/**
 * A request body read from elsewhere (a file) as it is sent, so that an upload of megabytes is never
 * held whole. `open` is called once per attempt: a retried request reads its body again.
 */
export interface BodySource {
  readonly length: number;
  /**
   * The body, piece by piece. A piece is valid only until the next is asked for (a source may read
   * every piece into one reused buffer): a consumer that keeps pieces copies them.
   */
  open(): AsyncIterable<Uint8Array>;
}

/** A request's body: bytes in memory, or a {@link BodySource}. */
export type RequestBody = Uint8Array | string | BodySource | null;

/** True for a body that is read as it is sent. */
export function isBodySource(body: unknown): body is BodySource {
  return typeof body === 'object' && body !== null && typeof (body as BodySource).open === 'function';
}

/** The body's length in bytes, or null for a GET or HEAD without one (no Content-Length is sent). */
export function bodyLength(method: string, body: RequestBody): number | null {
  if (body === null) return method === 'GET' || method === 'HEAD' ? null : 0;
  return typeof body === 'string' ? Buffer.byteLength(body) : body.length;
}

/**
 * Writes the body and ends the request. Bytes in memory go in one `end`, which node:http sends in
 * the same write as the head. A streamed body is written piece by piece, each written before the
 * next is read (a source may reuse one buffer), so that only a piece or two is ever in memory.
 */
export async function writeBody(req: Http.ClientRequest, body: RequestBody): Promise<void> {
  if (!isBodySource(body)) {
    req.end(body ?? undefined);
    return;
  }
  let sent = 0;
  for await (const piece of body.open()) {
    if (req.destroyed) return;
    sent += piece.length;
    if (sent > body.length) throw new Error(`the request body is longer than its ${body.length} bytes`);
    await new Promise<void>((resolve, reject) => req.write(piece, (err) => (err ? reject(err) : resolve())));
  }
  if (sent !== body.length) throw new Error(`the request body ended at ${sent} of ${body.length} bytes`);
  req.end();
}
