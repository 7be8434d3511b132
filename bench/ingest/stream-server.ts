// The ingest bench's relay: serves pre-made frames on com.atproto.sync.subscribeRepos at a set rate,
// with @atproto/xrpc-server's stream server (which sends one frame, waits for the socket to take it,
// then the next: a consumer that falls behind slows the sender, which the bench sees).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { XrpcStreamServer, type Frame } from '@atproto/xrpc-server';

/** One step: these frames at this rate; `sent` hears each frame as it goes out. */
export interface Step {
  frames: Buffer[];
  rate: number;
  sent?: (index: number, at: number) => void;
}

export interface BenchRelay {
  url: string;
  /** Sends a step's frames at its rate; resolves when the last was taken by the socket. */
  run(step: Step): Promise<{ startedAt: number; endedAt: number }>;
  close(): Promise<void>;
}

/** A frame whose bytes are already made: sending costs no encoding. */
function raw(bytes: Buffer): Frame {
  return { toBytes: () => bytes } as unknown as Frame;
}

export async function startBenchRelay(): Promise<BenchRelay> {
  let connected: (() => void) | undefined;
  const isConnected = new Promise<void>((r) => (connected = r));
  let current: { step: Step; done: (r: { startedAt: number; endedAt: number }) => void } | undefined;
  let next: (() => void) | undefined;

  async function* frames(signal: AbortSignal): AsyncGenerator<Frame> {
    connected?.();
    while (!signal.aborted) {
      if (current === undefined) {
        await new Promise<void>((r) => (next = r));
        continue;
      }
      const { step, done } = current;
      const startedAt = performance.now();
      const perMs = step.rate / 1000;
      for (let i = 0; i < step.frames.length; i++) {
        const due = startedAt + i / perMs;
        const ahead = due - performance.now();
        if (ahead > 2) await new Promise((r) => setTimeout(r, ahead));
        step.sent?.(i, performance.now());
        yield raw(step.frames[i]!);
      }
      current = undefined;
      done({ startedAt, endedAt: performance.now() });
    }
  }

  const server = http.createServer((_req, res) => res.writeHead(404).end());
  const streams = new XrpcStreamServer({
    server,
    path: '/xrpc/com.atproto.sync.subscribeRepos',
    handler: (_req: http.IncomingMessage, signal: AbortSignal) => frames(signal),
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `ws://127.0.0.1:${port}`,
    async run(step) {
      await isConnected;
      return new Promise((done) => {
        current = { step, done };
        next?.();
      });
    },
    async close() {
      const wss = streams.wss as unknown as { clients: Set<{ terminate(): void }>; close(): void };
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}
