import { KnotlessError } from '../errors.ts';
import { ObjectInflater, type Inflated } from './inflate.ts';
import { PackFile, type ByteSource } from './pack-file.ts';

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

/** Bytes read ahead at once, so that a pack of small objects is read a megabyte at a time. */
const WINDOW = 1024 * 1024;

/**
 * A view of a pack that keeps one window of it in memory: the walk moves forward through the pack,
 * and an object's compressed bytes are read in one piece (a window grows only to the largest object).
 */
class Window {
  readonly #src: ByteSource;
  #start = 0;
  #buf: Buffer = Buffer.alloc(0);
  #space: Buffer = Buffer.alloc(0);

  constructor(src: ByteSource) {
    this.#src = src;
  }

  /** The bytes from `at`, at most `len` of them and never past `end`. */
  get(at: number, len: number, end: number): Buffer {
    const want = Math.min(len, end - at);
    if (at < this.#start || at + want > this.#start + this.#buf.length) {
      // One buffer, grown only for an object larger than any before: a new one per window would be
      // garbage that V8 collects late (see PackFile.chunks).
      const size = Math.min(Math.max(want, WINDOW), end - at);
      if (this.#space.length < size) this.#space = Buffer.allocUnsafe(size);
      this.#start = at;
      this.#buf = this.#src.readInto(this.#space.subarray(0, size), at);
    }
    return this.#buf.subarray(at - this.#start, at - this.#start + want);
  }
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
export function checkPackBounds(pack: Uint8Array | ByteSource, id: string, maxObjectBytes: number): void {
  const src = pack instanceof Uint8Array ? PackFile.fromBytes(pack) : pack;
  if (src.length < 32 || src.read(0, 4).toString('latin1') !== 'PACK')
    throw refuse(id, 'it is not a git pack');
  const top = src.read(4, 8);
  const version = top.readUInt32BE(0);
  if (version !== 2 && version !== 3) throw refuse(id, `pack version ${version} is unknown`);
  const count = top.readUInt32BE(4);
  const end = src.length - 20;
  const win = new Window(src);
  const inflater = new ObjectInflater();
  try {
    walk();
  } finally {
    inflater.close();
  }
  function walk(): void {
    let off = 12;
    for (let n = 0; n < count; n++) {
      if (off >= end) throw refuse(id, `it is truncated (${n} of ${count} objects)`);
      // An object's header: at most 10 bytes of type and size, then 10 of offset or 20 of base id.
      const hdr = win.get(off, 32, end);
      let i = 0;
      let byte = hdr[i++]!;
      const type = (byte >> 4) & 7;
      let size = byte & 0x0f;
      let shift = 4;
      while (byte & 0x80) {
        if (i >= hdr.length || shift > 49) throw refuse(id, 'an object header is malformed');
        byte = hdr[i++]!;
        size += (byte & 0x7f) * 2 ** shift;
        shift += 7;
      }
      if (type === 0 || type === 5) throw refuse(id, `object ${n} has unknown type ${type}`);
      if (type === OFS_DELTA) {
        do byte = hdr[i++] ?? 0;
        while (byte & 0x80 && i < hdr.length);
      } else if (type === REF_DELTA) i += 20;
      off += i;
      if (off >= end) throw refuse(id, `it is truncated (${n} of ${count} objects)`);
      if (size > maxObjectBytes)
        throw refuse(
          id,
          `object ${n} would inflate to ${size} bytes, more than the limit of ${maxObjectBytes}`,
        );
      const out = inflateObject(win, inflater, off, end, size);
      if (out === undefined) throw refuse(id, `object ${n} is damaged or larger than it says`);
      const used = out.used;
      if (out.size !== size) throw refuse(id, `object ${n} is not the size it says`);
      if (size > RATIO_FLOOR && size > MAX_INFLATE_RATIO * used)
        throw refuse(id, `object ${n} is a decompression bomb (${used} bytes inflating to ${size})`);
      if (type === OFS_DELTA || type === REF_DELTA) {
        const result = deltaSize(out.head, deltaSize(out.head, 0).next).value;
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
}

/**
 * Inflates one object at most to its declared size; undefined when it is damaged or larger. Its
 * compressed bytes are read in one window sized for what git writes (zlib's worst case is a little
 * over the object's size); a stream longer than that (legal, if odd) is read again with a window
 * twice as large, up to the pack's end.
 */
function inflateObject(
  win: Window,
  inflater: ObjectInflater,
  off: number,
  end: number,
  size: number,
): Inflated | undefined {
  for (let span = Math.max(64 * 1024, size + (size >>> 8) + 1024); ; span *= 2) {
    const input = win.get(off, span, end);
    const out = inflater.inflate(input, size);
    if (out === 'damaged' || (out === 'short' && off + input.length >= end)) return undefined;
    if (out !== 'short') return out;
  }
}
