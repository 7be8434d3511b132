import fs from 'node:fs';
import type { Config } from '../config/env.ts';
import type { ResponseHeaders } from './http1-codec.ts';
import { Http1Pool } from './http1.ts';

/** A finished HTTP exchange. */
export interface HttpResponse {
  status: number;
  headers: ResponseHeaders;
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

/**
 * Keep-alive connections, so consecutive requests to a PDS share one connection (each new one costs
 * round trips), on the small HTTP/1.1 client in http1.ts (why not node:http: see there).
 */
function createTransport(config: Pick<Config, 'caCerts'>): Transport {
  const ca =
    config.caCerts === undefined
      ? undefined
      : [...process.getBuiltinModule('node:tls').rootCertificates, fs.readFileSync(config.caCerts, 'utf8')];
  const pool = new Http1Pool(ca);
  return {
    request(url, init) {
      const secure = url.protocol === 'https:';
      if (!secure && url.protocol !== 'http:')
        return Promise.reject(new Error(`unsupported protocol ${url.protocol}`));
      const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
      const port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
      const req = {
        method: init.method,
        target: `${url.pathname}${url.search}`,
        headers: { host: url.host, ...init.headers },
        body: init.body,
      };
      if (!isLocalhost(host)) return pool.request({ kind: 'tcp', host, port, secure }, req);
      // localhost is loopback by definition (RFC 6761), and resolved here as curl does: asking the
      // resolver first costs the helper's start-up ~8 ms, most of it Node compiling its IPv6 regex.
      return pool
        .request({ kind: 'tcp', host, port, secure, address: '127.0.0.1' }, req)
        .catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ECONNREFUSED') throw err;
          return pool.request({ kind: 'tcp', host, port, secure, address: '::1' }, req);
        });
    },
    close() {
      pool.close();
    },
  };
}

function isLocalhost(host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
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
    // Through Request, so that a Request (as the OAuth client passes) and form or buffer bodies all
    // arrive as one method, header set and byte string.
    const req = new Request(input, init);
    const headers: Record<string, string> = {};
    req.headers.forEach((value, name) => (headers[name] = value));
    const body = req.body === null ? null : new Uint8Array(await req.arrayBuffer());
    const res = await transport.request(new URL(req.url), { method: req.method, headers, body });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out.set(k, String(v));
    return new Response(res.status === 204 || res.status === 304 ? null : new Uint8Array(res.body), {
      status: res.status,
      headers: out,
    });
  };
}
