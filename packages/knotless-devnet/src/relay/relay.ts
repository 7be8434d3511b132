import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorFrame, MessageFrame, Subscription, XrpcStreamServer, type Frame } from '@atproto/xrpc-server';
import { answerReadApi } from './read-api.ts';

/**
 * The relay stand-in: no relay can be installed here, so the dev network offers the part of a
 * relay's API an appview reads, over the network's PDSes. It is a stand-in, not a relay: it keeps
 * no repositories, verifies nothing and forwards each PDS's frames as they come, only re-numbered.
 *
 * - `com.atproto.sync.subscribeRepos`: every PDS's event stream merged into one, with the stand-in's
 *   own sequence. It keeps the last `keep` frames for cursors: a cursor older than those gets an
 *   `#info` frame `OutdatedCursor` and then every kept frame, as a relay does; a cursor ahead of its
 *   sequence gets the error frame `FutureCursor`.
 * - `listRepos`, `listReposByCollection`, `getRepoStatus`: answered from the PDSes (read-api.ts).
 */
export interface Relay {
  /** http://127.0.0.1:port: the XRPC base an appview is given (`--relay`). */
  url: string;
  /** The sequence number of the last frame sent out (0 before any). */
  readonly seq: number;
  /** How many consumers follow its stream now. */
  readonly consumers: number;
  /**
   * Sends every live consumer an `#info` frame (e.g. `OutdatedCursor`), as a relay does when it
   * lost a consumer's position, and as a hostile one may do at will: for tests of what a consumer
   * makes of it.
   */
  info(name: string, message?: string): void;
  close(): Promise<void>;
}

export interface RelayOptions {
  /** The PDSes' http(s) URLs. */
  pdses: string[];
  /** 0 (the default) picks a free port. */
  port?: number;
  /** How many frames are kept for cursors (default 10,000). */
  keep?: number;
  /**
   * The first sequence number. By default the time in milliseconds: the stand-in keeps no state, and
   * a restarted one must still number after what it sent before, so that an old cursor reads as
   * outdated, never as one of the new numbers.
   */
  firstSeq?: number;
  /** Leave out listReposByCollection (answers MethodNotImplemented), as relays without it do. */
  withoutByCollection?: boolean;
  /**
   * Frames (by the stand-in's sequence number) not sent to live consumers, as a lossy link would
   * lose them: for tests of an appview's convergence. They are kept, and a cursor replays them.
   */
  drop?: (seq: number) => boolean;
  /**
   * Changes a frame's body (its type, `#commit`…, beside it) before it is numbered, kept and sent:
   * a relay that lies, for tests of what a consumer checks. Returns the body to send.
   */
  rewrite?: (type: string | undefined, body: Record<string, unknown>) => Record<string, unknown>;
  /** Hears why a PDS's stream broke off (it is followed again shortly). */
  log?: (line: string) => void;
}

const METHOD = 'com.atproto.sync.subscribeRepos';

/** One consumer's frames not yet sent: the stream server sends one, waits for it to go, takes the next. */
class Outbox {
  readonly #frames: Frame[] = [];
  #wake: (() => void) | undefined;
  closed = false;

  push(frame: Frame): void {
    this.#frames.push(frame);
    this.#wake?.();
  }

  get size(): number {
    return this.#frames.length;
  }

  async *drain(signal: AbortSignal): AsyncGenerator<Frame> {
    signal.addEventListener('abort', () => this.#wake?.());
    while (!signal.aborted) {
      const next = this.#frames.shift();
      if (next !== undefined) {
        yield next;
        if (next instanceof ErrorFrame) return;
        continue;
      }
      if (this.closed) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }
}

/** A consumer this many frames behind is cut off, as a relay cuts off a slow consumer. */
const MAX_BEHIND = 100_000;

export async function startRelay(opts: RelayOptions): Promise<Relay> {
  const keep = opts.keep ?? 10_000;
  const kept: MessageFrame[] = [];
  let seq = (opts.firstSeq ?? Date.now()) - 1;
  const live = new Set<Outbox>();

  const send = (box: Outbox, frame: Frame): void => {
    if (box.size > MAX_BEHIND) {
      box.push(new ErrorFrame({ error: 'ConsumerTooSlow', message: 'too far behind' }));
      live.delete(box);
      return;
    }
    box.push(frame);
  };

  /** A frame from a PDS: re-numbered, kept and sent to every live consumer. */
  const publish = (frame: MessageFrame): void => {
    seq += 1;
    const body =
      opts.rewrite?.(frame.type, frame.body as Record<string, unknown>) ??
      (frame.body as Record<string, unknown>);
    const ours = new MessageFrame({ ...body, seq }, frame.type === undefined ? {} : { type: frame.type });
    kept.push(ours);
    if (kept.length > keep) kept.splice(0, kept.length - keep);
    if (opts.drop?.(seq) !== true) for (const box of live) send(box, ours);
  };

  const upstreams = opts.pdses.map((pds) => followPds(pds, publish, opts.log));

  const server = http.createServer((req, res) => {
    answerReadApi(opts, req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'UpstreamFailure', message: String(err) }));
    });
  });
  const streams = new XrpcStreamServer({
    server,
    path: `/xrpc/${METHOD}`,
    handler: (req: http.IncomingMessage, signal: AbortSignal) => {
      const box = new Outbox();
      const raw = new URL(req.url ?? '/', 'http://relay').searchParams.get('cursor');
      const cursor = raw === null || raw === '' ? undefined : Number(raw);
      if (cursor !== undefined && !Number.isSafeInteger(cursor)) {
        box.push(new ErrorFrame({ error: 'InvalidRequest', message: 'cursor is not an integer' }));
      } else if (cursor !== undefined && cursor > seq) {
        box.push(new ErrorFrame({ error: 'FutureCursor', message: 'Cursor in the future.' }));
      } else {
        if (cursor !== undefined) {
          const oldest = (kept[0]?.body as { seq?: number } | undefined)?.seq ?? seq + 1;
          if (cursor < oldest - 1) {
            const info = {
              name: 'OutdatedCursor',
              message: 'Requested cursor exceeded limit. Possibly missing events',
            };
            box.push(new MessageFrame(info, { type: '#info' }));
          }
          for (const f of kept) if ((f.body as { seq: number }).seq > cursor) box.push(f);
        }
        live.add(box);
        signal.addEventListener('abort', () => live.delete(box));
      }
      return box.drain(signal);
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    get seq() {
      return seq;
    },
    get consumers() {
      return live.size;
    },
    info(name, message) {
      const frame = new MessageFrame(
        { name, ...(message === undefined ? {} : { message }) },
        { type: '#info' },
      );
      for (const box of live) send(box, frame);
    },
    close: async () => {
      for (const u of upstreams) u.stop();
      for (const box of live) box.closed = true;
      // The ws package ships no types here: the two members used, named.
      const wss = streams.wss as unknown as { clients: Set<{ terminate(): void }>; close(): void };
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await Promise.all(upstreams.map((u) => u.done));
    },
  };
}

/**
 * Follows one PDS's subscribeRepos (with @atproto/xrpc-server's client, which reconnects), from its
 * current end at first and from its last frame on each reconnection, so that a dropped connection
 * loses nothing the PDS still has.
 */
function followPds(
  pds: string,
  publish: (frame: MessageFrame) => void,
  log: (line: string) => void = () => {},
): { stop(): void; done: Promise<void> } {
  const ac = new AbortController();
  let cursor: number | undefined;
  const sub = new Subscription<Record<string, unknown>>({
    service: pds.replace(/^http/, 'ws'),
    method: METHOD,
    signal: ac.signal,
    maxReconnectSeconds: 2,
    getParams: () => (cursor === undefined ? {} : { cursor }),
    validate: (v) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined),
  });
  const done = (async () => {
    while (!ac.signal.aborted) {
      try {
        for await (const value of sub) {
          const frame = MessageFrame.fromLexValue(value as MessageFrame['body'], METHOD);
          const s = value['seq'];
          if (typeof s === 'number') cursor = s;
          // The PDS's own #info frames (its outdated cursor) are its business, not the consumers'.
          if (frame.type === '#info') continue;
          publish(frame);
        }
      } catch (err) {
        if (ac.signal.aborted) return;
        // An error frame from the PDS, or a connection that failed for good: start again shortly.
        log(`${pds}: ${String(err)}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  })();
  return { stop: () => ac.abort(), done };
}
