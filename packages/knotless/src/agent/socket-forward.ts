import type http from 'node:http';
import { BodyTooLarge, type ResponseHeaders } from 'knotless-core/xrpc/http-pool';
import type { BodySource } from 'knotless-core/xrpc/request-body';
import type { HttpRequest, HttpResponse } from 'knotless-core/xrpc/transport';

// The agent's socket as a helper process of its own reaches it: `POST /forward` carries one request
// of the helper's, and its answer back, in HTTP over the socket. The helper's cap, time limit and
// faults travel as headers (x-knotless-*), so that the helper meets them as it would directly. A
// helper the agent hosts calls `forward` itself (see AgentHost in client.ts).

/** Writes whose failure means the view they were built on may be wrong. */
const WRITES = /\/xrpc\/com\.atproto\.repo\.(putRecord|applyWrites|deleteRecord|createRecord)$/;

/** True for a request path that writes records. */
export function isWrite(pathname: string): boolean {
  return WRITES.test(pathname);
}

/** A request's whole body. */
export function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** An answer's headers as the agent passes them on (its own connection frames the body). */
function answerHeaders(headers: ResponseHeaders): Record<string, string> {
  const back: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers))
    if (
      typeof v === 'string' &&
      !['connection', 'keep-alive', 'transfer-encoding', 'content-length'].includes(k)
    )
      back[k] = v;
  return back;
}

/**
 * Forwarded request bodies past this size are passed on as they arrive rather than read whole: blob
 * uploads of megabytes. Ref writes (which group-commit.ts parses) are kilobytes of JSON.
 */
const STREAM_BODY_MIN = 64 * 1024;

/** A request's body read as it is sent on, once: the helper retries by sending it again. */
function streamedBody(req: http.IncomingMessage, length: number): BodySource {
  let opened = false;
  return {
    length,
    open: () => {
      if (opened) throw new Error('a forwarded request body can be sent only once');
      opened = true;
      return req;
    },
  };
}

/** `POST /forward`: the helper's request, sent on with `forward`, and its answer, back to the helper. */
export async function answerForward(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  forward: (target: URL, init: HttpRequest) => Promise<HttpResponse>,
): Promise<void> {
  const target = new URL(String(req.headers['x-knotless-url']));
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (
      typeof v === 'string' &&
      !k.startsWith('x-knotless-') &&
      !['host', 'connection', 'content-length'].includes(k)
    )
      headers[k] = v;
  }
  const write = isWrite(target.pathname);
  const length = Number(req.headers['content-length']);
  const body =
    !write && Number.isSafeInteger(length) && length > STREAM_BODY_MIN
      ? streamedBody(req, length)
      : await readBody(req);
  // The helper's cap for this answer travels with it, so the agent never holds more than it would.
  const cap = Number(req.headers['x-knotless-max-bytes']);
  const capped = Number.isSafeInteger(cap) && cap >= 0;
  // A download's answer (a blob) goes on to the helper as it arrives, unheld, and the helper counts
  // it against its cap and hangs up past it, in its own words (see `gone`): the agent cutting it
  // would look like a lost connection to the helper, which retries. An announced length is
  // checked here, before a byte is read.
  const streaming = req.method === 'GET';
  const maxBytes = streaming ? Number.MAX_SAFE_INTEGER : capped ? cap : undefined;
  // Stops the request to the PDS when the helper hangs up on a streamed answer.
  const gone = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) gone.abort(new Error('the helper hung up'));
  });
  const stream: Pick<HttpRequest, 'sink' | 'onHead' | 'signal'> = !streaming
    ? {}
    : {
        signal: gone.signal,
        onHead: (status, headers) => {
          if (capped && Number(headers['content-length']) > cap) throw new BodyTooLarge(cap);
          res.writeHead(status, answerHeaders(headers));
        },
        // Written before the connection reads on: the piece is a view of its read buffer.
        sink: (part) => new Promise<void>((resolve) => res.write(part, () => resolve())),
      };
  // The helper's own time limit, so that a time-out is met and named as the helper would.
  const limit = Number(req.headers['x-knotless-deadline']);
  const deadlineMs = Number.isSafeInteger(limit) && limit > 0 ? limit : undefined;
  let out;
  try {
    out = await forward(target, {
      method: req.method ?? 'GET',
      headers,
      body,
      ...(maxBytes === undefined ? {} : { maxBytes }),
      ...(deadlineMs === undefined ? {} : { deadlineMs }),
      ...stream,
    });
  } catch (err) {
    // Part of a streamed answer has gone out already: the helper sees it cut, as it would directly.
    if (res.headersSent) {
      res.destroy();
      return;
    }
    // The helper rebuilds the same fault from these headers, as if it had met it itself.
    const { code, limit } = err as { code?: unknown; limit?: unknown };
    if (typeof code !== 'string') throw err;
    res
      .writeHead(502, {
        'x-knotless-error': code,
        'x-knotless-limit': typeof limit === 'number' ? String(limit) : '',
      })
      .end(err instanceof Error ? err.message : String(err));
    return;
  }
  if (res.headersSent) res.end();
  else res.writeHead(out.status, answerHeaders(out.headers)).end(out.body);
}
