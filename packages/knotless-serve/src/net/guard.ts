import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { fetchOver, type Transport } from 'knotless-core';

/** Thrown when a PDS, blob or image would be fetched from an address the appview must not reach. */
export class AddressRefused extends Error {
  override name = 'AddressRefused';
}

/** IANA's global unicast block for IPv6 (RFC 4291 §2.4): everything outside it is special. */
const IPV6_GLOBAL = ipaddr.IPv6.parseCIDR('2000::/3');

// ipaddr.js reads the deprecated IPv4-compatible form `::a.b.c.d` as if it were IPv4-mapped
// `::ffff:a.b.c.d`, so ::/96 is caught with Node's own parser before ipaddr.js sees the address.
const IPV4_COMPATIBLE = new net.BlockList();
IPV4_COMPATIBLE.addSubnet('::', 96, 'ipv6');

/**
 * Why `address` must not be connected to, or undefined when it is public unicast. The ranges are
 * ipaddr.js's (its `range()` names every loopback, private, link-local, CGNAT, multicast,
 * benchmarking, documentation/TEST-NET, reserved, NAT64, 6to4, Teredo, ORCHID… block), so the list
 * is maintained upstream rather than by hand here. Only `unicast` passes. An IPv4-mapped address is
 * judged by the IPv4 address it carries, which is where the socket really goes; the translation
 * prefixes (NAT64, 6to4, Teredo) are refused outright, as a PDS has no reason to sit behind one and
 * what they embed may be private. IPv6 must also be in 2000::/3, the only block IANA
 * allocates for global unicast.
 */
export function refusedReason(address: string): string | undefined {
  if (net.isIPv6(address) && IPV4_COMPATIBLE.check(address, 'ipv6')) return 'IPv4-compatible or unspecified';
  // Checked first, so that parse's throw is never the answer: it fails only on what isValid refuses.
  if (!ipaddr.isValid(address)) return 'not an IP address';
  let addr = ipaddr.parse(address);
  if (addr.kind() === 'ipv6') {
    const v6 = addr as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) addr = v6.toIPv4Address();
    else {
      const range = v6.range();
      if (range !== 'unicast') return range;
      if (!v6.match(IPV6_GLOBAL)) return 'outside 2000::/3';
      return undefined;
    }
  }
  const range = addr.range();
  return range === 'unicast' ? undefined : range;
}

/** Throws unless every address a name resolved to is public: one private answer refuses the name. */
export function checkAddresses(hostname: string, addresses: readonly { address: string }[]): void {
  for (const a of addresses) {
    const why = refusedReason(a.address);
    if (why !== undefined) throw new AddressRefused(`${hostname} resolves to ${a.address} (${why})`);
  }
}

type LookupCallback = (err: Error | null, address: string | dns.LookupAddress[], family?: number) => void;

/**
 * A DNS lookup that resolves every address of a name and refuses the name if any one is not public.
 * Used as the socket's `lookup`, so the address checked is the address connected to: a second,
 * different answer (DNS rebinding) is never asked for.
 */
export function safeLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) return callback(err, []);
    try {
      checkAddresses(hostname, addresses);
    } catch (refused) {
      return callback(refused as AddressRefused, []);
    }
    if (options.all === true) return callback(null, addresses);
    const first = addresses[0];
    if (first === undefined) return callback(new AddressRefused(`${hostname} has no address`), []);
    callback(null, first.address, first.family);
  });
}

/**
 * Refuses a URL before any connection: only http(s), and an IP literal must be public (Node connects
 * to literals without calling `lookup`, so {@link safeLookup} would not see them).
 */
export function checkUrl(url: URL, dev: boolean): void {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new AddressRefused(`unsupported protocol ${url.protocol}`);
  if (dev) return;
  const literal = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(literal) === 0) return;
  const why = refusedReason(literal);
  if (why !== undefined) throw new AddressRefused(`${url.host} is not a public address (${why})`);
}

/** Agents whose connections go only to public addresses (any address in dev mode). */
export function guardedAgents(dev: boolean): { 'http:': http.Agent; 'https:': https.Agent } {
  const opts = dev ? {} : { lookup: safeLookup };
  return {
    'http:': new http.Agent({ keepAlive: true, ...opts }),
    'https:': new https.Agent({ keepAlive: true, ...opts }),
  };
}

/** Largest response a transport accepts; a blob part is at most a few MiB. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** Limits on one outgoing request of the transport. */
export interface FetchLimits {
  /** Longest silence on the socket, in ms. */
  idleMs: number;
  /** Longest whole request, headers to last byte, in ms. */
  totalMs: number;
}

/**
 * A knotless Transport for reading PDSes. Outside dev mode it connects only to public addresses
 * (checked at connection time, so DNS rebinding does not help), bounds response sizes, and stops a
 * request that goes silent or runs past its total time (a slow-drip PDS cannot hold a mirror sync).
 */
export function guardedTransport(dev: boolean, limits: FetchLimits): Transport {
  const agents = guardedAgents(dev);
  return {
    async request(url, init) {
      checkUrl(url, dev);
      return new Promise((resolve, reject) => {
        const mod = url.protocol === 'https:' ? https : http;
        const req = mod.request(url, {
          method: init.method,
          headers: init.headers,
          agent: agents[url.protocol as 'http:' | 'https:'],
          timeout: limits.idleMs,
        });
        const total = setTimeout(
          () => req.destroy(new Error(`${url.host} took longer than ${limits.totalMs} ms`)),
          limits.totalMs,
        );
        const max = Math.min(init.maxBytes ?? MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES);
        const { signal } = init;
        const abort = (): void => void req.destroy(signal?.reason as Error);
        const fail = (err: Error): void => {
          clearTimeout(total);
          signal?.removeEventListener('abort', abort);
          reject(err);
        };
        if (signal?.aborted === true) abort();
        signal?.addEventListener('abort', abort, { once: true });
        req.on('timeout', () => req.destroy(new Error(`${url.host} went silent for ${limits.idleMs} ms`)));
        req.on('error', fail);
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > max) req.destroy(new Error(`response from ${url.host} is too large`));
            else chunks.push(c);
          });
          res.on('error', fail);
          res.on('end', () => {
            clearTimeout(total);
            signal?.removeEventListener('abort', abort);
            resolve({
              status: res.statusCode ?? 0,
              headers: flatHeaders(res.headers),
              body: Buffer.concat(chunks),
            });
          });
        });
        req.end(init.body ?? undefined);
      });
    },
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}

/**
 * The fetch identity resolution uses (PLC, did:web documents, handles' https files): the guarded
 * transport's, so that it reaches only public addresses outside dev mode, with the same time limits
 * as every other request of the appview. @atproto/identity's own default fetch is never used: it
 * loads undici, which needs Node 22, and would be a second guard to keep equal to this one.
 */
export function guardedFetch(dev: boolean, limits: FetchLimits): typeof globalThis.fetch {
  return fetchOver(guardedTransport(dev, limits));
}

/** Response headers as single strings (repeated headers joined), the form knotless's transports give. */
export function flatHeaders(h: http.IncomingHttpHeaders): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : v]));
}
