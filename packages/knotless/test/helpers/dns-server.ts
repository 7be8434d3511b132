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

/**
 * A DNS server on loopback answering every query with these TXT records (each one string), for the
 * name asked: the query marked as a response, its answer count set, one answer per record pointing
 * back at the question's name (RFC 1035 §4.1.3, §3.3.14). Closed after the file.
 */
export async function txtServer(records: string[]): Promise<string> {
  const socket = dgram.createSocket('udp4');
  servers.push(socket);
  socket.on('message', (query, from) => {
    const head = Buffer.from(query);
    head[2] = head[2]! | 0x80;
    head[3] = 0x80;
    head.writeUInt16BE(records.length, 6);
    const answers = records.map((text) => {
      const data = Buffer.from(text, 'utf8');
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      rr.writeUInt16BE(16, 2); // TXT
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6);
      rr.writeUInt16BE(data.length + 1, 10);
      return Buffer.concat([rr, Buffer.from([data.length]), data]);
    });
    socket.send(Buffer.concat([head, ...answers]), from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return `127.0.0.1:${socket.address().port}`;
}
