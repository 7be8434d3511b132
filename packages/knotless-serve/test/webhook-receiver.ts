// A real webhook receiver on loopback for the tests: it records every request (headers and body)
// and answers as it is told: 204, a status, a redirect, or never.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Requests it holds open without answering (its `hang` mode). */
  open(): number;
  /** Answers from now on as `mode` says. */
  answer(mode: Mode): void;
  close(): Promise<void>;
}

/** 'ok' answers 204; a number answers that status; 'redirect' answers 302 to `/elsewhere`; 'hang' never answers. */
export type Mode = 'ok' | 'hang' | 'redirect' | number;

export async function startReceiver(first: Mode = 'ok'): Promise<Receiver> {
  let mode = first;
  const received: Received[] = [];
  const held = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      if (mode === 'hang') {
        held.add(res);
        res.on('close', () => held.delete(res));
      } else if (mode === 'redirect') res.writeHead(302, { location: '/elsewhere' }).end();
      else res.writeHead(mode === 'ok' ? 204 : mode).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    open: () => held.size,
    answer: (m) => void (mode = m),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** True when `r` carries a valid `X-Knotless-Signature-256` for `secret`, checked as a receiver would. */
export function signatureHolds(r: Received, secret: string): boolean {
  const got = String(r.headers['x-knotless-signature-256'] ?? '');
  const want = `sha256=${crypto.createHmac('sha256', secret).update(r.body, 'utf8').digest('hex')}`;
  return got.length === want.length && crypto.timingSafeEqual(Buffer.from(got), Buffer.from(want));
}
