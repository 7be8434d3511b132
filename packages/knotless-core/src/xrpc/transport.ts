import fs from 'node:fs';
import type { Config } from '../config/env.ts';
import { HttpPool, type Endpoint, type PoolRequest, type PoolResponse } from './http-pool.ts';

/** A finished HTTP exchange. */
export type HttpResponse = PoolResponse;

/** What a request sends, and how much of an answer it accepts: a pooled request without its target. */
export type HttpRequest = Omit<PoolRequest, 'target'>;

/** Sends HTTP requests over this process's pooled connections. */
export interface Transport {
  request(url: URL, init: HttpRequest): Promise<HttpResponse>;
  /** Opens a connection to `url`'s server ahead of a request (see HttpPool.preconnect); optional. */
  preconnect?(url: URL): void;
  close(): void;
}

/**
 * Keep-alive connections, so consecutive requests to a PDS share one connection (each new one costs
 * round trips), on node:http and node:https with the bounds of http-pool.ts.
 */
function createTransport(config: TransportConfig): Transport {
  const ca =
    config.caCerts === undefined
      ? undefined
      : [...process.getBuiltinModule('node:tls').rootCertificates, fs.readFileSync(config.caCerts, 'utf8')];
  const pool = new HttpPool({
    ca,
    ...(config.httpTimeoutMs === undefined ? {} : { deadlineMs: config.httpTimeoutMs }),
  });
  const endpointOf = (url: URL, address?: string): Endpoint => {
    const secure = url.protocol === 'https:';
    const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = url.port === '' ? (secure ? 443 : 80) : Number(url.port);
    // localhost is loopback by definition (RFC 6761), and resolved here as curl does: asking the
    // resolver first costs the helper's start-up ~8 ms, most of it Node compiling its IPv6 regex.
    const local = address ?? (isLocalhost(host) ? '127.0.0.1' : undefined);
    return { kind: 'tcp', host, port, secure, ...(local === undefined ? {} : { address: local }) };
  };
  return {
    request(url, init) {
      if (url.protocol !== 'https:' && url.protocol !== 'http:')
        return Promise.reject(new Error(`unsupported protocol ${url.protocol}`));
      const req = {
        ...init,
        target: `${url.pathname}${url.search}`,
        headers: { host: url.host, ...init.headers },
      };
      const endpoint = endpointOf(url);
      if (endpoint.kind !== 'tcp' || endpoint.address !== '127.0.0.1') return pool.request(endpoint, req);
      return pool.request(endpoint, req).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ECONNREFUSED') throw err;
        return pool.request(endpointOf(url, '::1'), req);
      });
    },
    preconnect(url) {
      if (url.protocol === 'https:' || url.protocol === 'http:') pool.preconnect(endpointOf(url));
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

/** What the transport reads of the configuration (the time limit is optional for library callers). */
export type TransportConfig = Pick<Config, 'caCerts'> & Partial<Pick<Config, 'httpTimeoutMs'>>;

let shared: Transport | undefined;

/**
 * The one connection pool of this process; KNOTLESS_CA_CERTS adds trusted certificates and
 * KNOTLESS_HTTP_TIMEOUT bounds each request.
 */
export function transportFor(config: TransportConfig): Transport {
  shared ??= createTransport(config);
  return shared;
}

/** Closes the pool so the process can exit without waiting for idle sockets. */
export function closeTransport(): void {
  shared?.close();
  shared = undefined;
}

/** Most bytes a fetchOver answer may have: DID documents and handle files are a few hundred bytes. */
export const FETCH_MAX_BYTES = 1024 * 1024;
/** Redirects fetchOver follows for one request, where the caller asked for `redirect: 'follow'`. */
export const FETCH_MAX_REDIRECTS = 5;

/**
 * A `fetch` over the transport, for libraries that want one (the identity resolver), so that they
 * share its connections and its trusted certificates. It honours `signal` (the resolver's timeout)
 * and `redirect`: @atproto/identity asks PLC and did:web lookups not to follow ('error') and the
 * handle's https file to follow, as the atproto handle spec allows. Followed redirects are bounded,
 * never go from https to http, and drop credentials when they leave the origin.
 */
export function fetchOver(transport: Transport): typeof globalThis.fetch {
  return async (input: string | URL | Request, init?: RequestInit) => {
    // Through Request, so that a Request (as the OAuth client passes) and form or buffer bodies all
    // arrive as one method, header set, byte string, signal and redirect mode.
    const req = new Request(input, init);
    const headers: Record<string, string> = {};
    req.headers.forEach((value, name) => (headers[name] = value));
    const body = req.body === null ? null : new Uint8Array(await req.arrayBuffer());
    const res = await requestFollowing(
      transport,
      new URL(req.url),
      { method: req.method, headers, body, maxBytes: FETCH_MAX_BYTES, signal: req.signal },
      req.redirect,
    );
    return toResponse(res);
  };
}

/**
 * A request that handles redirects as fetch's `redirect` mode says: 'manual' hands the redirect
 * back, 'error' refuses it (a TypeError, as fetch), 'follow' follows up to {@link FETCH_MAX_REDIRECTS}
 * of them, never from https to http, dropping credentials when they leave the origin.
 */
export async function requestFollowing(
  transport: Transport,
  start: URL,
  init: HttpRequest,
  mode: 'follow' | 'error' | 'manual',
): Promise<HttpResponse> {
  let url = start;
  let { method, headers, body } = init;
  for (let hops = 0; ; hops++) {
    const res = await transport.request(url, { ...init, method, headers, body });
    const location = res.headers['location'];
    if (!isRedirect(res.status) || location === undefined || mode === 'manual') return res;
    if (mode === 'error')
      throw new TypeError(`${url.origin} redirected (HTTP ${res.status}), which was refused`);
    if (hops >= FETCH_MAX_REDIRECTS) throw new TypeError(`more than ${FETCH_MAX_REDIRECTS} redirects`);
    const next = new URL(location, url);
    if (next.protocol !== 'https:' && (next.protocol !== 'http:' || url.protocol === 'https:'))
      throw new TypeError(
        `${url.origin} redirected to ${next.protocol} (HTTP ${res.status}), which was refused`,
      );
    if (next.origin !== url.origin) headers = withoutCredentials(headers);
    // As fetch does: 303, and 301/302 after a POST, turn into a GET without a body.
    if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
      method = 'GET';
      body = null;
    }
    url = next;
  }
}

function isRedirect(status: number): boolean {
  return status === 301 || status === 302 || status === 303 || status === 307 || status === 308;
}

function withoutCredentials(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers))
    if (!['authorization', 'cookie', 'proxy-authorization', 'dpop'].includes(k.toLowerCase())) out[k] = v;
  return out;
}

function toResponse(res: HttpResponse): Response {
  const out = new Headers();
  for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out.set(k, v);
  return new Response(res.status === 204 || res.status === 304 ? null : new Uint8Array(res.body), {
    status: res.status,
    headers: out,
  });
}
