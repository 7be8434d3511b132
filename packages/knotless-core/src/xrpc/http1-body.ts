import type * as Net from 'node:net';
import { writeRequestHead } from './http1-codec.ts';

// Request bodies for the HTTP/1.1 client (http1.ts): in memory, or streamed from a file.

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

/** Bodies up to this size go out in the same write as the head (see #send). */
const COALESCE_MAX = 64 * 1024;

/**
 * Writes the request. A small body goes out in one write with the head: two writes make two TCP
 * segments (and two TLS records), and a peer or middlebox that acknowledges late would hold the
 * second. A streamed body is written piece by piece, waiting for the socket to drain, so that
 * only a piece or two is ever in memory.
 */
export async function writeRequest(
  socket: Net.Socket,
  req: { method: string; target: string; headers: Record<string, string>; body: RequestBody },
): Promise<void> {
  const raw = req.body;
  const body = raw === null || isBodySource(raw) ? raw : typeof raw === 'string' ? Buffer.from(raw) : raw;
  // A POST without a body still says so, or a server would wait for one.
  const length = body === null ? (req.method === 'GET' || req.method === 'HEAD' ? null : 0) : body.length;
  const head = writeRequestHead(req.method, req.target, req.headers, length);
  if (body === null || body.length === 0) {
    socket.write(head);
    return;
  }
  if (!isBodySource(body)) {
    socket.write(body.length <= COALESCE_MAX ? Buffer.concat([head, body]) : head);
    if (body.length > COALESCE_MAX) socket.write(body);
    return;
  }
  socket.write(head);
  let sent = 0;
  for await (const piece of body.open()) {
    if (socket.destroyed) return;
    sent += piece.length;
    if (sent > body.length) throw new Error(`the request body is longer than its ${body.length} bytes`);
    // Written before the next piece is read: a source may reuse one buffer for every piece.
    await new Promise<void>((resolve) => socket.write(piece, () => resolve()));
  }
  if (sent !== body.length) throw new Error(`the request body ended at ${sent} of ${body.length} bytes`);
}
