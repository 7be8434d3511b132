// The event stream's early filter: a PDS's stream carries every account on it, and the agent decodes
// only the frames that may concern an account it keeps a view of.

/** A DAG-CBOR frame header `{t, op: 1}` (keys sorted length first, as DAG-CBOR requires). */
function header(t: string): Buffer {
  const name = Buffer.from(t, 'utf8');
  return Buffer.concat([
    Buffer.from([0xa2, 0x61, 0x74, 0x60 + name.length]),
    name,
    Buffer.from([0x62, 0x6f, 0x70, 0x01]),
  ]);
}

/** The headers of the messages that each concern one account (its DID is in the body). */
const ACCOUNT_HEADERS = ['#commit', '#sync', '#identity', '#account'].map(header);

/**
 * False only for a frame that is certainly one account's message about an account not in `followed`:
 * its header is exactly a commit's, sync's, identity's or account's (as DAG-CBOR encodes it), and no
 * followed DID occurs anywhere in its bytes. A CBOR text string is its UTF-8 bytes, so a message
 * about a followed account holds that DID verbatim. Anything else (error and info frames, another
 * encoding, a DID that occurs by chance) is decoded and handled as before: a false positive costs a
 * decode (about 30 µs for a small commit), never a missed event. `needles` caches each DID's bytes.
 */
export function mayConcern(
  chunk: Uint8Array,
  followed: Iterable<string>,
  needles = new Map<string, Buffer>(),
): boolean {
  const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (!ACCOUNT_HEADERS.some((h) => bytes.subarray(0, h.length).equals(h))) return true;
  for (const did of followed) {
    let needle = needles.get(did);
    if (needle === undefined) needles.set(did, (needle = Buffer.from(did, 'utf8')));
    if (bytes.includes(needle)) return true;
  }
  return false;
}
