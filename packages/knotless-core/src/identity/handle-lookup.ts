import { FETCH_MAX_BYTES, requestFollowing, type Transport } from '../xrpc/transport.ts';

/**
 * The DID a handle names, by the atproto handle spec's two ways: a DNS TXT record at
 * `_atproto.<handle>` holding exactly one `did=…`, else the first line of
 * `https://<handle>/.well-known/atproto-did` (redirects followed, as the spec allows); undefined
 * when neither names one, or neither answered. Both start at once and DNS wins, as in
 * @atproto/identity's HandleResolver, whose rules these are; written with the command's own HTTP
 * client because loading that library and `fetch` costs more CPU than the rest of a command's start,
 * and a cached handle is checked again on every command. The caller validates the DID, and tells a
 * DNS outage from a name with no record (resolver.ts, `dnsFailure`).
 */
export async function lookupHandle(
  transport: Transport,
  handle: string,
  timeoutMs: number,
  /** The signal that fires once `timeoutMs` have passed; a test gives one it fires itself. */
  limit: (ms: number) => AbortSignal = (ms) => AbortSignal.timeout(ms),
): Promise<string | undefined> {
  const http = new AbortController();
  const signal = AbortSignal.any([http.signal, limit(timeoutMs)]);
  const viaHttp = wellKnown(transport, handle, signal).catch(() => undefined);
  const viaDns = await dnsRecord(handle);
  if (viaDns !== undefined) {
    http.abort();
    return viaDns;
  }
  return viaHttp;
}

async function dnsRecord(handle: string): Promise<string | undefined> {
  const dns = process.getBuiltinModule('node:dns/promises');
  let records: string[][];
  try {
    records = await dns.resolveTxt(`_atproto.${handle}`);
  } catch {
    // No such name or record, or no answer: the https file may still name the DID, and the caller
    // asks DNS again to tell an outage from a name without a record.
    return undefined;
  }
  const found = records.map((chunks) => chunks.join('')).filter((r) => r.startsWith('did='));
  return found.length === 1 ? found[0]!.slice('did='.length) : undefined;
}

async function wellKnown(
  transport: Transport,
  handle: string,
  signal: AbortSignal,
): Promise<string | undefined> {
  const url = new URL('/.well-known/atproto-did', `https://${handle}`);
  const res = await requestFollowing(
    transport,
    url,
    { method: 'GET', headers: {}, body: null, maxBytes: FETCH_MAX_BYTES, signal },
    'follow',
  );
  // Only an answer that is one: an error page does not name a DID, whatever its first line says.
  if (res.status < 200 || res.status > 299) return undefined;
  const did = res.body.toString('utf8').split('\n')[0]!.trim();
  return did.startsWith('did:') ? did : undefined;
}
