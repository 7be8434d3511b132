// Loopback servers that misbehave on purpose (lie about sizes, never finish, pour bytes), raw TCP
// where Node's own server would refuse to misbehave; closed after the test file.
import net from 'node:net';
import { after } from 'node:test';
import { closeTransport } from 'knotless-core/xrpc/transport';

/** Every server started, closed when the file is done. */
export const servers: net.Server[] = [];
after(() => {
  for (const s of servers) s.close();
  closeTransport();
});

/** A raw TCP server that calls `answer` with each connection once the request head is in. */
export async function rawServer(
  answer: (sock: net.Socket) => void,
): Promise<{ port: number; sockets: net.Socket[] }> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((sock) => {
    sockets.push(sock);
    sock.on('error', () => sock.destroy());
    let head = '';
    const onData = (d: Buffer): void => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      sock.off('data', onData);
      answer(sock);
    };
    sock.on('data', onData);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, sockets };
}

export const closed = (sock: net.Socket): Promise<void> =>
  sock.destroyed ? Promise.resolve() : new Promise((resolve) => sock.once('close', () => resolve()));

/** Writes `piece` as fast as the socket drains, until it closes; returns the bytes written. */
export function flood(sock: net.Socket, piece: Buffer): { written: number } {
  const count = { written: 0 };
  const pump = (): void => {
    while (!sock.destroyed && count.written < 20e9) {
      count.written += piece.length;
      if (!sock.write(piece)) return void sock.once('drain', pump);
    }
  };
  pump();
  return count;
}
