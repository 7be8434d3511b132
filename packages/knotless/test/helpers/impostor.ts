// An impostor for the handle-takeover tests: a DID of the test's own on the real dev PLC
// whose document claims a victim's handle and names a PDS the test runs, a loopback server that
// records every request and answers like a PDS would, so that a client trusting the claim would go
// all the way (log in, send the password) rather than stop at an error.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { registerDid } from 'knotless-devnet';
import { writeWrappers } from '../../../knotless-devnet/src/dev/env-file.ts';
import type { TestNet } from './network.ts';

/** One request the impostor's PDS received. */
export interface Recorded {
  method: string;
  url: string;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** The impostor: its DID, its PDS's URL and what reached it. */
export interface Impostor {
  did: string;
  url: string;
  requests: Recorded[];
  /** The XRPC methods that reached it, in order. */
  methods(): string[];
  close(): Promise<void>;
}

function fakeJwt(did: string): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const exp = Math.floor(Date.now() / 1000) + 3600;
  return `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub: did, exp })}.c2ln`;
}

/** Registers a DID claiming `handle` on the PLC at `plcUrl`, hosted on a recording server of its own. */
export async function startImpostor(plcUrl: string, handle: string): Promise<Impostor> {
  const requests: Recorded[] = [];
  const state = { did: '' };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '/';
      requests.push({
        method: req.method ?? '',
        url,
        body: Buffer.concat(chunks).toString('utf8'),
        headers: req.headers,
      });
      const nsid = new URL(url, 'http://x').pathname.replace(/^\/xrpc\//, '');
      const answers: Record<string, unknown> = {
        'com.atproto.server.describeServer': { did: 'did:web:localhost', availableUserDomains: ['.test'] },
        'com.atproto.server.createSession': {
          did: state.did,
          handle,
          accessJwt: fakeJwt(state.did),
          refreshJwt: fakeJwt(state.did),
        },
        'com.atproto.server.getSession': { did: state.did, handle },
        'com.atproto.repo.listRecords': { records: [] },
      };
      const answer = answers[nsid];
      res.writeHead(answer === undefined ? 400 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer ?? { error: 'RecordNotFound', message: 'Could not locate record' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.did = await registerDid(plcUrl, { handle, pds: url });
  return {
    did: state.did,
    url,
    requests,
    methods: () => requests.map((r) => new URL(r.url, 'http://x').pathname.replace(/^\/xrpc\//, '')),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A fresh user of the test network with git and the helper on PATH, not logged in. */
export function victimEnv(t: TestNet): Record<string, string> {
  const env = t.env();
  const bin = path.join(env['HOME']!, 'bin');
  writeWrappers(bin);
  return { ...env, PATH: `${bin}:${env['PATH']!}`, GIT_CONFIG_NOSYSTEM: '1' };
}
