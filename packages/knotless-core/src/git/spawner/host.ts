import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { MAX_ORDER_BYTES, type LaunchOrder, type SpawnerReport, type SpawnerRequest } from './wire.ts';

/**
 * The git spawner's side: a small process the warm agent forks at its start, which starts the
 * agent's git commands for it. Starting a process forks the one that asks, and a fork costs in
 * proportion to the memory it maps: the agent under load maps hundreds of MiB and spent most of its
 * busy time in `spawn`, its event loop stopped meanwhile; this process maps what bare Node does.
 *
 * Each command arrives on a connection of its own to a socket in a private directory, its order
 * (wire.ts) as the first line; the connection itself becomes git's stdin and stdout (git holds it
 * from then on, the spawner lets go of it before it says `spawned`, and the agent writes nothing on
 * it before that, so no byte of git's is ever read here). git's stderr and exit go to the agent on
 * the IPC channel. When the agent goes (the channel closes), so does the spawner.
 */
export function serveSpawns(): void {
  const report = (m: SpawnerReport): void => {
    // A report that cannot be sent means the agent is gone: so is this process.
    if (process.connected) process.send!(m, undefined, {}, (err: Error | null) => err && leave());
  };
  const children = new Map<number, ReturnType<typeof spawn>>();
  let token: Buffer | undefined;
  const server = net.createServer((conn) => readOrder(conn));
  // Written to fd 2 as it is (the agent's log): no stream is made on a descriptor it inherited.
  server.on('error', (err) => {
    fs.writeSync(2, `knotless git spawner: ${err.message}\n`);
    process.exit(1);
  });
  let socket: string | undefined;

  process.on('message', (m: SpawnerRequest) => {
    if (m.op === 'listen') {
      token = Buffer.from(m.token);
      socket = m.path;
      server.listen(m.path, () => report({ op: 'ready' }));
    } else if (m.op === 'kill') children.get(m.id)?.kill(m.signal);
  });
  // The agent left (or died): its directory for this socket goes too, then this process.
  const leave = (): never => {
    if (socket !== undefined) {
      fs.rmSync(socket, { force: true });
      fs.rmSync(path.dirname(socket), { recursive: true, force: true });
    }
    process.exit(0);
  };
  process.on('disconnect', leave);

  function readOrder(conn: net.Socket): void {
    const pieces: Buffer[] = [];
    let size = 0;
    const onData = (piece: Buffer): void => {
      pieces.push(piece);
      size += piece.length;
      const end = piece.indexOf(0x0a);
      if (end === -1) {
        if (size > MAX_ORDER_BYTES) conn.destroy();
        return;
      }
      conn.off('data', onData);
      conn.pause();
      const line = Buffer.concat(pieces);
      // The agent writes nothing after its order before `spawned`: anything more is not the agent.
      if (line.length !== size || line.indexOf(0x0a) !== line.length - 1) return void conn.destroy();
      start(conn, line.subarray(0, -1));
    };
    conn.on('data', onData);
    conn.on('error', () => conn.destroy());
  }

  function start(conn: net.Socket, line: Buffer): void {
    let order: LaunchOrder;
    try {
      order = JSON.parse(line.toString('utf8')) as LaunchOrder;
    } catch (err) {
      // Not an order of the agent's: the connection is refused, nothing starts.
      if (err instanceof SyntaxError) return void conn.destroy();
      throw err;
    }
    const given = Buffer.from(String(order.token));
    if (token === undefined || given.length !== token.length || !crypto.timingSafeEqual(given, token))
      return void conn.destroy();
    const { id } = order;
    let out: number | undefined;
    try {
      if (order.stdoutFile !== undefined) out = fs.openSync(order.stdoutFile, 'r+');
      const child = spawn('git', order.args, {
        env: order.env,
        ...(order.cwd === undefined ? {} : { cwd: order.cwd }),
        stdio: [order.stdin === 'ignore' ? 'ignore' : conn, out ?? conn, order.stderr],
      });
      children.set(id, child);
      child.stderr?.setEncoding('utf8').on('data', (text: string) => report({ op: 'stderr', id, text }));
      child.on('error', (err: NodeJS.ErrnoException) => {
        children.delete(id);
        report({ op: 'failed', id, code: err.code ?? 'EFAIL', message: err.message });
      });
      child.on('close', (code, signal) => {
        if (!children.delete(id)) return;
        report({ op: 'exit', id, code, signal });
      });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      report({ op: 'failed', id, code: e.code ?? 'EFAIL', message: e.message });
    } finally {
      if (out !== undefined) fs.closeSync(out);
      // git has its own copy: from here on only git and the agent hold the connection.
      conn.destroy();
    }
    if (children.has(id)) report({ op: 'spawned', id });
  }
}
