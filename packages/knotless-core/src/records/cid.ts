import crypto from 'node:crypto';

// A blob's CID in atproto is always CIDv1, raw codec (0x55), sha2-256 (0x12, 32 bytes), in base32
// (multibase prefix "b"). So checking one is computing that string from the bytes and comparing:
// a dozen lines here instead of the multiformats library in every git command's start-up bundle.
const CID_PREFIX = Uint8Array.of(0x01, 0x55, 0x12, 0x20);
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** The CID of a blob: CIDv1, raw codec, sha2-256, base32 (as a PDS names it). */
export function cidForBlob(bytes: Uint8Array): string {
  const digest = crypto.createHash('sha256').update(bytes).digest();
  return `b${writeBase32(Buffer.concat([CID_PREFIX, digest]))}`;
}

/** A blob's CID computed as its bytes arrive, so a download is checked without holding it. */
export class CidHasher {
  readonly #hash = crypto.createHash('sha256');

  update(part: Uint8Array): void {
    this.#hash.update(part);
  }

  cid(): string {
    return `b${writeBase32(Buffer.concat([CID_PREFIX, this.#hash.digest()]))}`;
  }
}

/** True when `bytes` hash to the blob CID `cid`; false for any other CID, or any other form of it. */
export function blobMatchesCid(bytes: Uint8Array, cid: string): boolean {
  return cid === cidForBlob(bytes);
}

/** RFC 4648 base32, lower case, without padding (multibase "b"). */
export function writeBase32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}
