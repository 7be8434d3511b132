import fs from 'node:fs';
import type * as Http from 'node:http';
import type * as Https from 'node:https';
import type * as Tls from 'node:tls';
import { createRequire } from 'node:module';
import type { Config } from '../config/env.ts';

// Loaded with require(): an ES import of node:http builds its whole namespace, whose lazy getters
// (WebSocket and friends) load Node's bundled undici — about 30 ms of every git command's start-up.
const require = createRequire(import.meta.url);
const http = require('node:http') as typeof Http;

/** A finished HTTP exchange. */
export interface HttpResponse {
  status: number;
  headers: Http.IncomingHttpHeaders;
  body: Buffer;
}

/** What a request sends. */
export interface HttpRequest {
  method: string;
  headers: Record<string, string>;
  body: Uint8Array | string | null;
}

/** Sends HTTP requests over this process's pooled connections. */
export interface Transport {
  request(url: URL, init: HttpRequest): Promise<HttpResponse>;
  close(): void;
}

/** Milliseconds to wait for a connection, then for each stretch of silence. */
const TIMEOUT_MS = 30_000;

/**
 * node:http and node:https with keep-alive agents, so consecutive requests to a PDS share one
 * connection (each new connection costs round trips). Written on the built-in client rather than
 * undici because it is already in the Node binary: a git command starts about 100 ms sooner.
 */
function createTransport(config: Pick<Config, 'caCerts'>): Transport {
  const ca =
    config.caCerts === undefined
      ? undefined
      : [...(require('node:tls') as typeof Tls).rootCertificates, fs.readFileSync(config.caCerts, 'utf8')];
  // https (and TLS) load on the first https request: a dev network on http never pays for them.
  let https: typeof Https | undefined;
  let httpsAgent: Https.Agent | undefined;
  const httpAgent = new http.Agent({ keepAlive: true });
  return {
    request(url, init) {
      const secure = url.protocol === 'https:';
      if (!secure && url.protocol !== 'http:')
        return Promise.reject(new Error(`unsupported protocol ${url.protocol}`));
      return new Promise((resolve, reject) => {
        if (secure) {
          https ??= require('node:https') as typeof Https;
          httpsAgent ??= new https.Agent({ keepAlive: true, ...(ca === undefined ? {} : { ca }) });
        }
        const options = { method: init.method, headers: init.headers, timeout: TIMEOUT_MS };
        const req = secure
          ? https!.request(url, { ...options, agent: httpsAgent! })
          : http.request(url, { ...options, agent: httpAgent });
        req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
        req.on('error', reject);
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
          );
        });
        req.end(init.body ?? undefined);
      });
    },
    close() {
      httpAgent.destroy();
      httpsAgent?.destroy();
    },
  };
}

let shared: Transport | undefined;

/** The one connection pool of this process; KNOTLESS_CA_CERTS adds trusted certificates. */
export function transportFor(config: Pick<Config, 'caCerts'>): Transport {
  shared ??= createTransport(config);
  return shared;
}

/** Closes the pool so the process can exit without waiting for idle sockets. */
export function closeTransport(): void {
  shared?.close();
  shared = undefined;
}

/**
 * A `fetch` over the transport, for libraries that want one (the identity resolver), so that they
 * share its connections and its trusted certificates.
 */
export function fetchOver(transport: Transport): typeof globalThis.fetch {
  return async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const headers = Object.fromEntries(new Headers(init?.headers).entries());
    const body =
      typeof init?.body === 'string' ? init.body : init?.body instanceof Uint8Array ? init.body : null;
    const res = await transport.request(url, { method: init?.method ?? 'GET', headers, body });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers))
      if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(', ') : v);
    return new Response(res.status === 204 || res.status === 304 ? null : res.body, {
      status: res.status,
      headers: out,
    });
  };
}
