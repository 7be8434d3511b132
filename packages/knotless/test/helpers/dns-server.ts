import dgram from 'node:dgram';
import { after } from 'node:test';

/** DNS answer statuses (RFC 1035 §4.1.1). */
export const RCODE = { SERVFAIL: 2, NXDOMAIN: 3 } as const;

const servers: dgram.Socket[] = [];
after(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
});

/**
 * A DNS server on loopback answering every query with `rcode` and no records: the query itself,
 * marked as a response (QR), with recursion available and the status set. Closed after the file.
 */
export async function dnsServer(rcode: number): Promise<string> {
  const socket = dgram.createSocket('udp4');
  servers.push(socket);
  socket.on('message', (query, from) => {
    const answer = Buffer.from(query);
    answer[2] = answer[2]! | 0x80;
    answer[3] = 0x80 | rcode;
    socket.send(answer, from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return `127.0.0.1:${socket.address().port}`;
}
