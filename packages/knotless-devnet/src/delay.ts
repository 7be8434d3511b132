import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { listenOnFreePort } from './ports.ts';

/** Options for {@link startDelayLink}. */
export interface DelayLinkOptions {
  /** Where each accepted connection is relayed to. */
  target: { host: string; port: number };
  /** The round-trip time to emulate; each direction is delayed by half of it. */
  rttMs: number;
  /** Charge a new connection one RTT for TCP's handshake (default true; false: connecting is free). */
  chargeHandshake?: boolean;
}

/** A running TCP relay that charges network round trips. */
export interface DelayLink {
  host: '127.0.0.1';
  port: number;
  /** Client connections accepted since start. */
  readonly connections: number;
  /** Stops listening and destroys every open connection at once, pending bytes included. */
  close(): Promise<void>;
}

// A FIN or a reset travels the wire like data, so it queues behind the bytes sent before it.
type Item = { due: number; what: Buffer | 'end' | 'reset' };

/**
 * Relays `from`'s bytes to `to`, each `delayMs` after it arrived but never before `opensAt`, in order.
 * Returns a function that drops whatever is still queued and relays nothing more.
 */
function delayLine(from: net.Socket, to: net.Socket, delayMs: number, opensAt: number): () => void {
  const queue: Item[] = [];
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let ended = false;
  let awaitingDrain = false;

  function deliver(what: Item['what']): void {
    if (to.destroyed) return;
    if (what === 'end') to.end();
    else if (what === 'reset') to.destroy();
    else if (!to.write(what) && !awaitingDrain) {
      // A receiver that stops reading slows the sender, as TCP's window would; bytes already on the
      // wire still arrive on time.
      awaitingDrain = true;
      from.pause();
      to.once('drain', () => {
        awaitingDrain = false;
        from.resume();
      });
    }
  }

  function arm(due: number): void {
    // Ceil, and the recheck in release(), because a timer may fire a fraction of a millisecond early.
    timer = setTimeout(release, Math.max(0, Math.ceil(due - performance.now())));
  }

  function release(): void {
    timer = undefined;
    const now = performance.now();
    let head: Item | undefined;
    while ((head = queue[0]) !== undefined && head.due <= now) {
      queue.shift();
      deliver(head.what);
    }
    if (head !== undefined) arm(head.due);
  }

  function send(what: Item['what']): void {
    if (stopped) return;
    const now = performance.now();
    const due = Math.max(now, opensAt) + delayMs;
    // With no delay, a timer's own latency (about a millisecond per hop) would be the only cost left.
    if (due <= now && queue.length === 0) {
      deliver(what);
      return;
    }
    queue.push({ due, what });
    if (timer === undefined) arm(due);
  }

  from.on('data', (chunk: Buffer) => send(chunk));
  from.on('end', () => {
    ended = true;
    send('end');
  });
  from.on('close', (hadError) => {
    if ((hadError || !ended) && !to.destroyed) send('reset');
  });

  return () => {
    stopped = true;
    queue.length = 0;
    clearTimeout(timer);
    timer = undefined;
  };
}

/**
 * Starts a TCP relay on 127.0.0.1 at a free port that delays every chunk by half of `rttMs` each way and
 * holds a new connection's first bytes one RTT more, for the TCP handshake a real client waits out.
 */
export async function startDelayLink(opts: DelayLinkOptions): Promise<DelayLink> {
  const half = opts.rttMs / 2;
  const open = new Set<{ sockets: net.Socket[]; stop: () => void }>();
  let connections = 0;

  // Half-open, so one side's FIN reaches the other only after the bytes in flight before it.
  const server = net.createServer({ allowHalfOpen: true, noDelay: true }, (client) => {
    connections++;
    // Connecting at once costs the target nothing it would notice: clients speak first in HTTP and TLS,
    // so their first bytes are what pay for the handshake.
    const upstream = net.connect({
      host: opts.target.host,
      port: opts.target.port,
      allowHalfOpen: true,
      noDelay: true,
    });
    const opensAt = performance.now() + (opts.chargeHandshake === false ? 0 : opts.rttMs);
    const stops = [delayLine(client, upstream, half, opensAt), delayLine(upstream, client, half, 0)];
    const entry = { sockets: [client, upstream], stop: () => stops.forEach((stop) => stop()) };
    open.add(entry);
    for (const socket of entry.sockets) {
      // Failures surface as 'close' with hadError, which delayLine turns into a reset of the other side.
      socket.on('error', () => {});
      socket.on('close', () => {
        if (!client.destroyed || !upstream.destroyed) return;
        entry.stop();
        open.delete(entry);
      });
    }
  });
  const port = await listenOnFreePort(server);

  return {
    host: '127.0.0.1',
    port: port,
    get connections() {
      return connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const entry of open) {
          entry.stop();
          for (const socket of entry.sockets) socket.destroy();
        }
        open.clear();
      }),
  };
}
