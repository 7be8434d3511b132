import fs from 'node:fs/promises';
import type http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * Which of `pids` holds the client end of the loopback TCP connection from `clientPort` to
 * `serverPort`, read from Linux's /proc: the connection's socket inode from /proc/net/tcp{,6}, then
 * each process's open descriptors. Tests use it to prove which process sent a request (the agent,
 * not the helper), which no header can prove. Undefined when none of them holds it, or without /proc.
 */
export async function connectionOwner(
  clientPort: number,
  serverPort: number,
  pids: number[],
): Promise<number | undefined> {
  if (pids.length === 0) return undefined;
  // The connection is open while this runs (its client waits for an answer), so its line is in the
  // table; but the kernel writes /proc/net/tcp a page per read() while walking a hash table that
  // other sockets change meanwhile, and a line can be left out of one reading. Read it again.
  let inode: string | undefined;
  for (let i = 0; i < READINGS && inode === undefined; i++) inode = await socketInode(clientPort, serverPort);
  if (inode === undefined) return undefined;
  const link = `socket:[${inode}]`;
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = await fs.readdir(`/proc/${pid}/fd`);
    } catch {
      continue; // gone, or not ours to read: it holds nothing we can see
    }
    for (const fd of fds) {
      const target = await fs.readlink(`/proc/${pid}/fd/${fd}`).catch(() => undefined);
      if (target === link) return pid;
    }
  }
  return undefined;
}

/** Readings of the TCP tables before a connection is taken to be absent (see connectionOwner). */
const READINGS = 20;

/** The inode of the socket whose local port is `local` and remote port `remote` (hex in /proc/net/tcp). */
async function socketInode(local: number, remote: number): Promise<string | undefined> {
  const hex = (port: number) => port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await fs.readFile(table, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      if (cols[1]!.endsWith(`:${hex(local)}`) && cols[2]!.endsWith(`:${hex(remote)}`)) return cols[9];
    }
  }
  return undefined;
}

/** A request an HTTP server received, with which watched process sent it. */
export interface OwnedRequest {
  method: string;
  path: string;
  /** One of the watched pids, or undefined: none of them holds the connection. */
  pid: number | undefined;
  /** The status the server answered with, once it has answered (before the client reads it). */
  status?: number;
}

/**
 * Logs every request `server` (on loopback, in this process) receives from now on, with which of
 * `pids()` sent it: each connection is looked up once, at its first request, while its client waits
 * for the answer. `settled()` waits for the lookups still running and returns the log.
 */
export function watchRequests(
  server: http.Server,
  pids: () => number[],
): { settled(): Promise<OwnedRequest[]>; stop(): void } {
  const port = (server.address() as AddressInfo).port;
  const owners = new WeakMap<Socket, Promise<number | undefined>>();
  const log: OwnedRequest[] = [];
  const pending: Array<Promise<unknown>> = [];
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    const entry: OwnedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', pid: undefined };
    log.push(entry);
    res.once('finish', () => (entry.status = res.statusCode));
    let owner = owners.get(req.socket);
    if (owner === undefined) {
      owner = connectionOwner(req.socket.remotePort!, port, pids());
      owners.set(req.socket, owner);
    }
    pending.push(owner.then((pid) => (entry.pid = pid)));
  };
  server.on('request', onRequest);
  return {
    settled: async () => {
      await Promise.all(pending);
      return log;
    },
    stop: () => server.off('request', onRequest),
  };
}
