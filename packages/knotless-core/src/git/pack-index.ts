// Reads the object names and offsets of a pack index (.idx), as `git show-index` prints them. Read
// here rather than through show-index because a push's fold reads one index per pack it merges, and
// each git process costs a process start (a fork, of the agent's spawner or of the helper) besides
// git's own. The format is git's (Documentation/gitformat-pack.txt, "pack-*.idx files"), version 1
// and 2, SHA-1 names: the indexes read here are ones git itself just wrote; the trailing checksum is
// checked, which also refuses an index of SHA-256 names (its checksum is SHA-256, and longer).
import crypto from 'node:crypto';

const OID_BYTES = 20;
const FANOUT_BYTES = 256 * 4;
const TRAILER_BYTES = 2 * OID_BYTES;
const V2_MAGIC = 0xff744f63; // "\377tOc"

/** One object of a pack: its name and where it starts in the pack. */
export interface IndexEntry {
  oid: string;
  offset: number;
}

function fail(why: string): never {
  throw new Error(`not a pack index git wrote: ${why}`);
}

/** The object count from a fanout table at `at`, checked to never decrease. */
function fanoutCount(idx: Buffer, at: number): number {
  let prev = 0;
  for (let i = 0; i < 256; i++) {
    const n = idx.readUInt32BE(at + i * 4);
    if (n < prev) fail('its fanout table decreases');
    prev = n;
  }
  return prev;
}

function readV1(idx: Buffer): IndexEntry[] {
  const count = fanoutCount(idx, 0);
  if (idx.length !== FANOUT_BYTES + count * (4 + OID_BYTES) + TRAILER_BYTES) fail('its size is wrong');
  const out: IndexEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = FANOUT_BYTES + i * (4 + OID_BYTES);
    out.push({ offset: idx.readUInt32BE(at), oid: idx.toString('hex', at + 4, at + 4 + OID_BYTES) });
  }
  return out;
}

function readV2(idx: Buffer): IndexEntry[] {
  if (idx.length < 8 + FANOUT_BYTES + TRAILER_BYTES) fail('it is too short');
  if (idx.readUInt32BE(4) !== 2) fail(`version ${idx.readUInt32BE(4)}`);
  const count = fanoutCount(idx, 8);
  const names = 8 + FANOUT_BYTES;
  const offsets = names + count * (OID_BYTES + 4); // past the names and their CRC32s
  const large = offsets + count * 4;
  const largeCount = (idx.length - TRAILER_BYTES - large) / 8;
  if (!Number.isInteger(largeCount) || largeCount < 0) fail('its size is wrong');
  const out: IndexEntry[] = [];
  for (let i = 0; i < count; i++) {
    const small = idx.readUInt32BE(offsets + i * 4);
    let offset = small;
    // The high bit marks an index into the table of 8-byte offsets (packs past 2 GiB).
    if (small >= 0x80000000) {
      const j = small - 0x80000000;
      if (j >= largeCount) fail('an offset points past its table');
      const big = idx.readBigUInt64BE(large + j * 8);
      if (big > BigInt(Number.MAX_SAFE_INTEGER)) fail('an offset is too large');
      offset = Number(big);
    }
    out.push({ oid: idx.toString('hex', names + i * OID_BYTES, names + (i + 1) * OID_BYTES), offset });
  }
  return out;
}

/** Every object a pack index lists, in the index's order (by name). Throws on anything malformed. */
export function readPackIndex(idx: Buffer): IndexEntry[] {
  if (idx.length < FANOUT_BYTES + TRAILER_BYTES) fail('it is too short');
  const sum = crypto
    .createHash('sha1')
    .update(idx.subarray(0, idx.length - OID_BYTES))
    .digest();
  if (!sum.equals(idx.subarray(idx.length - OID_BYTES))) fail('its checksum does not match');
  return idx.readUInt32BE(0) === V2_MAGIC ? readV2(idx) : readV1(idx);
}
