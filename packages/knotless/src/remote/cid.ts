import crypto from 'node:crypto';
import { CID } from 'multiformats/cid';

const SHA2_256 = 0x12;

/** True when `bytes` hash to the sha2-256 digest that `cid` names; false for any other CID. */
export function blobMatchesCid(bytes: Uint8Array, cid: string): boolean {
  let parsed: CID;
  try {
    parsed = CID.parse(cid);
  } catch {
    return false;
  }
  if (parsed.multihash.code !== SHA2_256) return false;
  const digest = crypto.createHash('sha256').update(bytes).digest();
  return Buffer.from(parsed.multihash.digest).equals(digest);
}
