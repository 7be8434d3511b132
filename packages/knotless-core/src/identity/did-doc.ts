import type { Transport } from '../xrpc/transport.ts';
import { FETCH_MAX_BYTES } from '../xrpc/transport.ts';

/**
 * A did:plc document read straight from the PLC directory, for the lookups every command makes (a
 * cached handle is checked afresh on each). Written here rather than through @atproto/identity
 * because loading that library and the `fetch` it calls costs more CPU (about 55 ms, measured by the
 * helper's CPU profile) than the rest of a command's start; the reading rules are the atproto DID
 * spec's as @atproto/common-web applies them (`getHandle`, `getPdsEndpoint`). did:web documents
 * still go through the library.
 */

/** What a command needs of a DID document: the PDS it names and the handle it claims (unverified). */
export interface AtprotoData {
  pds: string | undefined;
  claimed: string | undefined;
}

/** A document that is not a DID document of `did`: the library's PoorlyFormattedDidDocumentError. */
export class BadDidDocument extends Error {
  override name = 'BadDidDocument';
}

/**
 * Reads a did:plc document from the directory at `plcUrl`: null when the directory says no such
 * DID (404), an error for any other failure (it proves nothing about the account), as the library's
 * PLC resolver does. Redirects are refused, as the library asks of fetch.
 */
export async function readPlcDocument(
  transport: Transport,
  plcUrl: string,
  did: string,
  signal: AbortSignal,
): Promise<AtprotoData | null> {
  const doc = await fetchPlcDocument(transport, plcUrl, did, signal);
  return doc === null ? null : atprotoData(did, doc);
}

/**
 * A did:plc document as the directory at `plcUrl` serves it, parsed but not yet checked: null for
 * 404, an error for any other failure (see {@link readPlcDocument}).
 */
export async function fetchPlcDocument(
  transport: Transport,
  plcUrl: string,
  did: string,
  signal: AbortSignal,
): Promise<unknown> {
  const url = new URL(`/${encodeURIComponent(did)}`, plcUrl);
  const res = await transport.request(url, {
    method: 'GET',
    headers: { accept: 'application/did+ld+json,application/json' },
    body: null,
    maxBytes: FETCH_MAX_BYTES,
    signal,
  });
  if (res.status === 404) return null;
  if (res.status < 200 || res.status > 299) throw new Error(`the PLC directory answered HTTP ${res.status}`);
  try {
    return JSON.parse(res.body.toString('utf8')) as unknown;
  } catch {
    throw new BadDidDocument(`the PLC directory's document for ${did} is not JSON`);
  }
}

/**
 * The PDS and claimed handle of a DID document, which must be an object whose `id` is `did`, with
 * `alsoKnownAs` (strings) and `service` (objects with string ids) where present. The handle is the
 * first `at://` alias; the PDS the `#atproto_pds` service of type `AtprotoPersonalDataServer` with an
 * http(s) URL.
 */
export function atprotoData(did: string, doc: unknown): AtprotoData {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new BadDidDocument(`the document of ${did} is not an object`);
  const { id, alsoKnownAs, service } = doc as Record<string, unknown>;
  if (id !== did) throw new BadDidDocument(`the document of ${did} names another DID`);
  if (
    alsoKnownAs !== undefined &&
    !(Array.isArray(alsoKnownAs) && alsoKnownAs.every((a) => typeof a === 'string'))
  )
    throw new BadDidDocument(`the aliases in the document of ${did} are not strings`);
  if (
    service !== undefined &&
    !(Array.isArray(service) && service.every((s) => isObject(s) && typeof s['id'] === 'string'))
  )
    throw new BadDidDocument(`the services in the document of ${did} are malformed`);
  const alias = alsoKnownAs?.find((a) => a.startsWith('at://'));
  const pdsService = (service as Array<Record<string, unknown>> | undefined)?.find(
    (s) => s['id'] === '#atproto_pds' || s['id'] === `${did}#atproto_pds`,
  );
  return { claimed: alias?.slice('at://'.length), pds: pdsEndpoint(pdsService) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function pdsEndpoint(service: Record<string, unknown> | undefined): string | undefined {
  if (service?.['type'] !== 'AtprotoPersonalDataServer') return undefined;
  const endpoint = service['serviceEndpoint'];
  if (typeof endpoint !== 'string') return undefined;
  if (!endpoint.startsWith('http://') && !endpoint.startsWith('https://')) return undefined;
  return URL.canParse(endpoint) ? endpoint : undefined;
}
