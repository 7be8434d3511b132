import zlib from 'node:zlib';
import { KnotlessError } from '../errors.ts';

/** An object bigger than this many times its compressed size (and over 1 MiB) is a decompression bomb. */
export const MAX_INFLATE_RATIO = 500;
const RATIO_FLOOR = 1024 * 1024;

const OFS_DELTA = 6;
const REF_DELTA = 7;

function refuse(id: string, why: string): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `Pack ${id} from the PDS was refused: ${why}; nothing was written.`,
  );
}

/** Reads a little-endian base-128 varint (the sizes at the start of delta data). */
function deltaSize(data: Buffer, at: number): { value: number; next: number } {
  let value = 0;
  let shift = 0;
  let i = at;
  for (;;) {
    const b = data[i++];
    if (b === undefined) return { value: Number.NaN, next: i };
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if ((b & 0x80) === 0) return { value, next: i };
  }
}

/**
 * Walks every object of a pack before git sees it, and refuses the pack when it is malformed
 * (truncated, objects overrunning their declared sizes, unknown types) or when an object would
 * inflate beyond `maxObjectBytes` (a blob, or a delta's result) or far beyond its compressed size:
 * a small record must not make git write gigabytes. Each object is inflated at most to its
 * declared size, so the walk itself is bounded by the same limit.
 */
export function checkPackBounds(pack: Uint8Array, id: string, maxObjectBytes: number): void {
  const buf = Buffer.from(pack.buffer, pack.byteOffset, pack.byteLength);
  if (buf.length < 32 || buf.toString('latin1', 0, 4) !== 'PACK') throw refuse(id, 'it is not a git pack');
  const version = buf.readUInt32BE(4);
  if (version !== 2 && version !== 3) throw refuse(id, `pack version ${version} is unknown`);
  const count = buf.readUInt32BE(8);
  const end = buf.length - 20;
  let off = 12;
  for (let n = 0; n < count; n++) {
    if (off >= end) throw refuse(id, `it is truncated (${n} of ${count} objects)`);
    let byte = buf[off++]!;
    const type = (byte >> 4) & 7;
    let size = byte & 0x0f;
    let shift = 4;
    while (byte & 0x80) {
      if (off >= end || shift > 49) throw refuse(id, 'an object header is malformed');
      byte = buf[off++]!;
      size += (byte & 0x7f) * 2 ** shift;
      shift += 7;
    }
    if (type === 0 || type === 5) throw refuse(id, `object ${n} has unknown type ${type}`);
    if (type === OFS_DELTA) {
      do byte = buf[off++] ?? 0;
      while (byte & 0x80 && off < end);
    } else if (type === REF_DELTA) off += 20;
    if (size > maxObjectBytes)
      throw refuse(
        id,
        `object ${n} would inflate to ${size} bytes, more than the limit of ${maxObjectBytes}`,
      );
    let out: { buffer: Buffer; engine: zlib.Inflate };
    try {
      out = zlib.inflateSync(buf.subarray(off, end), {
        info: true,
        maxOutputLength: Math.max(1, size),
        // One output chunk the size the object declares: no growing and joining of 16 KiB chunks.
        chunkSize: Math.min(Math.max(size + 1, 64), 64 * 1024 * 1024),
      }) as unknown as { buffer: Buffer; engine: zlib.Inflate };
    } catch {
      throw refuse(id, `object ${n} is damaged or larger than it says`);
    }
    const used = out.engine.bytesWritten;
    if (out.buffer.length !== size) throw refuse(id, `object ${n} is not the size it says`);
    if (size > RATIO_FLOOR && size > MAX_INFLATE_RATIO * used)
      throw refuse(id, `object ${n} is a decompression bomb (${used} bytes inflating to ${size})`);
    if (type === OFS_DELTA || type === REF_DELTA) {
      const result = deltaSize(out.buffer, deltaSize(out.buffer, 0).next).value;
      if (!(result <= maxObjectBytes))
        throw refuse(
          id,
          `object ${n} is a delta to ${result} bytes, more than the limit of ${maxObjectBytes}`,
        );
    }
    off += used;
  }
  if (off !== end) throw refuse(id, 'it has bytes after its last object');
}
