import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Transport } from 'knotless';

/** Thrown when a PDS or blob would be fetched from an address the appview must not reach. */
export class AddressRefused extends Error {
  override name = 'AddressRefused';
}

// Loopback, private, link-local, carrier-grade NAT, multicast and reserved ranges: a record naming a
// PDS there would make the appview probe its own network (server-side request forgery).
const blocked = new net.BlockList();
for (const [addr, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['224.0.0.0', 3],
] as const)
  blocked.addSubnet(addr, prefix, 'ipv4');
for (const [addr, prefix] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['::ffff:0:0', 96],
] as const)
  blocked.addSubnet(addr, prefix, 'ipv6');

/** True for addresses that are not public unicast. */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIPv6(address) ? 'ipv6' : 'ipv4';
  return blocked.check(address, family);
}

/** A DNS lookup that refuses private answers: the check happens on the address actually connected to. */
function safeLookup(
  hostname: string,
  options: dns.LookupOptions,
  callback: (err: Error | null, address: string | dns.LookupAddress[], family?: number) => void,
): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) return callback(err, []);
    const bad = addresses.find((a) => isPrivateAddress(a.address));
    if (bad !== undefined)
      return callback(new AddressRefused(`${hostname} resolves to a private address (${bad.address})`), []);
    if (options.all === true) return callback(null, addresses);
    const first = addresses[0];
    if (first === undefined) return callback(new AddressRefused(`${hostname} has no address`), []);
    callback(null, first.address, first.family);
  });
}

/** Largest response a transport accepts; a blob part is at most a few MiB. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/**
 * A knotless Transport for reading PDSes. Outside dev mode it connects only to public addresses
 * (checked at connection time, so DNS rebinding does not help) and bounds response sizes.
 */
export function guardedTransport(dev: boolean): Transport {
  const opts = dev ? {} : { lookup: safeLookup };
  const agents = {
    'http:': new http.Agent({ keepAlive: true, ...opts }),
    'https:': new https.Agent({ keepAlive: true, ...opts }),
  };
  return {
    request(url, init) {
      const literal = url.hostname.replace(/^\[|\]$/g, '');
      if (!dev && net.isIP(literal) !== 0 && isPrivateAddress(literal))
        return Promise.reject(new AddressRefused(`${url.host} is a private address`));
      if (url.protocol !== 'http:' && url.protocol !== 'https:')
        return Promise.reject(new AddressRefused(`unsupported protocol ${url.protocol}`));
      return new Promise((resolve, reject) => {
        const mod = url.protocol === 'https:' ? https : http;
        const req = mod.request(url, {
          method: init.method,
          headers: init.headers,
          agent: agents[url.protocol as 'http:' | 'https:'],
          timeout: 30_000,
        });
        req.on('timeout', () => req.destroy(new Error(`${url.host} timed out`)));
        req.on('error', reject);
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > MAX_RESPONSE_BYTES) req.destroy(new Error(`response from ${url.host} is too large`));
            else chunks.push(c);
          });
          res.on('error', reject);
          res.on('end', () =>
            resolve({
              status: res.statusCode ?? 0,
              headers: flatHeaders(res.headers),
              body: Buffer.concat(chunks),
            }),
          );
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

/** The fetch identity resolution uses: plain fetch in dev mode, else undefined (the library's own safe fetch). */
export function guardedFetch(dev: boolean): typeof globalThis.fetch | undefined {
  return dev ? globalThis.fetch : undefined;
}

/** Response headers as single strings (repeated headers joined), the form knotless's transports give. */
function flatHeaders(h: http.IncomingHttpHeaders): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : v]));
}
