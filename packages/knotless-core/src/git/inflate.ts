import zlib from 'node:zlib';

/** What inflating one pack object gave: its inflated size, the compressed bytes used, its first bytes. */
export interface Inflated {
  size: number;
  used: number;
  /** The first (up to 32) inflated bytes: a delta's header is there. */
  head: Buffer;
}

/** `short`: the input ended before the zlib stream did; `damaged`: not zlib, or larger than allowed. */
export type InflateResult = Inflated | 'short' | 'damaged';

const OUT_BYTES = 64 * 1024;

/**
 * The native zlib handle under Node's Inflate stream. Not public API: see {@link ObjectInflater} for
 * why it is used, and the fallback when a Node version lacks it.
 */
interface RawHandle {
  writeSync(
    flush: number,
    input: Buffer,
    inOff: number,
    inLen: number,
    out: Buffer,
    outOff: number,
    outLen: number,
  ): void;
  reset(): void;
  onerror: (message: string, errno: number, code?: string) => void;
}

/**
 * Inflates a pack's objects one after another, only to learn their sizes and where each ends.
 *
 * Why not `zlib.inflateSync`: it returns each object whole, so checking a pack allocates as many
 * bytes as the pack inflates to, and V8 frees those buffers only once tens of megabytes of them
 * have piled up; measured, that was most of a clone's memory above Node's own (98 of 99 MiB for a
 * 22 MiB pack, 77 without it). Node has no public API that inflates into a caller's buffer, so this
 * drives the native handle under `zlib.createInflate()` (what `inflateSync` itself does) with one
 * 64 KiB output buffer, reset for each object. Where a Node version lacks that handle, it falls back
 * to `inflateSync`: the same answers, more garbage.
 */
export class ObjectInflater {
  readonly #stream: zlib.Inflate;
  readonly #raw: { handle: RawHandle; state: Uint32Array } | undefined;
  readonly #out = Buffer.allocUnsafe(OUT_BYTES);
  #error: string | undefined;

  constructor() {
    this.#stream = zlib.createInflate();
    const inner = this.#stream as unknown as { _handle?: RawHandle; _writeState?: unknown };
    const handle = inner._handle;
    if (typeof handle?.writeSync === 'function' && inner._writeState instanceof Uint32Array) {
      handle.onerror = (message, _errno, code) => (this.#error = code ?? message);
      this.#raw = { handle, state: inner._writeState };
    }
  }

  /** Inflates the zlib stream at the start of `input`, refusing more than `max` bytes of output. */
  inflate(input: Buffer, max: number): InflateResult {
    if (this.#raw === undefined) return inflateWhole(input, max);
    const { handle, state } = this.#raw;
    handle.reset();
    this.#error = undefined;
    let inOff = 0;
    let size = 0;
    let head: Buffer | undefined;
    for (;;) {
      handle.writeSync(zlib.constants.Z_FINISH, input, inOff, input.length - inOff, this.#out, 0, OUT_BYTES);
      if (this.#error !== undefined) return this.#error === 'Z_BUF_ERROR' ? 'short' : 'damaged';
      const [outLeft, inLeft] = [state[0]!, state[1]!];
      const made = OUT_BYTES - outLeft;
      head ??= Buffer.from(this.#out.subarray(0, Math.min(32, made)));
      size += made;
      // As inflateSync's maxOutputLength, which cannot be 0: a zero-size object may inflate to one byte.
      if (size > Math.max(1, max)) return 'damaged';
      inOff = input.length - inLeft;
      // Output room left over with Z_FINISH means the stream ended (an error would have been reported).
      if (outLeft !== 0) return { size, used: inOff, head };
    }
  }

  close(): void {
    this.#stream.close();
  }
}

/** What `ObjectInflater` answers through `zlib.inflateSync` (exported to test that both agree). */
export function inflateWhole(input: Buffer, max: number): InflateResult {
  try {
    const out = zlib.inflateSync(input, {
      info: true,
      maxOutputLength: Math.max(1, max),
      chunkSize: Math.min(Math.max(max + 1, 64), 64 * 1024 * 1024),
    }) as unknown as { buffer: Buffer; engine: zlib.Inflate };
    return { size: out.buffer.length, used: out.engine.bytesWritten, head: out.buffer.subarray(0, 32) };
  } catch (err) {
    return (err as { code?: string }).code === 'Z_BUF_ERROR' ? 'short' : 'damaged';
  }
}
