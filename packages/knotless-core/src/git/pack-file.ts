import fs from 'node:fs';
import path from 'node:path';

/** Bytes read at once when a pack is streamed (to git, to a hash, to an upload). */
export const READ_CHUNK = 1024 * 1024;

/** Something whose bytes can be read at any offset: a pack on disk, or (small) in memory. */
export interface ByteSource {
  readonly length: number;
  /** `len` bytes from `at` (fewer only at the end). */
  read(at: number, len: number): Buffer;
  /** The same, into `out` (a buffer used again and again); returns the part filled. */
  readInto(out: Buffer, at: number): Buffer;
}

type Segment = { fd: number; size: number } | { bytes: Buffer };

const segmentSize = (s: Segment): number => ('fd' in s ? s.size : s.bytes.length);

/**
 * A pack held as open files (a downloaded pack's blob parts in order, or pack-objects' output) or, when
 * small, as bytes: so that packs of any size go from the network to git, and from git to the
 * network, through the disk rather than memory. Open descriptors keep reading the same bytes even when
 * a file is renamed or deleted meanwhile (another process pruning the blob cache). `close` releases
 * the descriptors and deletes the files the pack owns.
 */
export class PackFile implements ByteSource {
  readonly length: number;
  readonly #segments: Segment[];
  readonly #owned: string[];
  #closed = false;

  private constructor(segments: Segment[], owned: string[]) {
    this.#segments = segments;
    this.#owned = owned;
    this.length = segments.reduce((n, s) => n + segmentSize(s), 0);
  }

  /** A pack in memory (an inline pack: a few KiB). */
  static fromBytes(bytes: Uint8Array): PackFile {
    return new PackFile([{ bytes: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength) }], []);
  }

  /** A pack made of open files, in order; `owned` are deleted on close. */
  static fromFds(parts: Array<{ fd: number; size: number }>, owned: string[] = []): PackFile {
    return new PackFile(parts, owned);
  }

  /** The bytes, when the pack is small enough to be held (an inline pack); reads the files otherwise. */
  bytes(): Buffer {
    return this.read(0, this.length);
  }

  read(at: number, len: number): Buffer {
    return this.readInto(Buffer.allocUnsafe(Math.max(0, Math.min(this.length, at + len) - at)), at);
  }

  /** Fills `out` (or as much of it as the pack has) with the bytes from `at`; returns what was filled. */
  readInto(out: Buffer, at: number): Buffer {
    const end = Math.min(this.length, at + out.length);
    let base = 0;
    let filled = 0;
    for (const s of this.#segments) {
      const size = segmentSize(s);
      const from = Math.max(at + filled, base);
      if (from < end && from < base + size) {
        const n = Math.min(end, base + size) - from;
        if ('bytes' in s) s.bytes.copy(out, filled, from - base, from - base + n);
        else readFully(s.fd, out, filled, n, from - base);
        filled += n;
      }
      base += size;
      if (base >= end) break;
    }
    return out.subarray(0, filled);
  }

  /**
   * The bytes from `at`, `length` of them, in pieces of at most `piece` bytes, all read into one
   * buffer: a piece is valid only until the next is asked for, so a consumer writes it out (and
   * waits until it is written) first. Reusing the buffer matters: a new megabyte per piece is garbage
   * that V8 collects only after tens of megabytes, which is exactly the memory streaming saves.
   */
  async *chunks(at = 0, length = this.length - at, piece = READ_CHUNK): AsyncGenerator<Buffer> {
    const buf = Buffer.allocUnsafe(Math.min(piece, Math.max(1, length)));
    for (let off = at; off < at + length; off += piece) {
      yield this.readInto(buf.subarray(0, Math.min(piece, at + length - off)), off);
      // Lets the event loop breathe between megabytes (other downloads, timers).
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** Releases the descriptors and deletes the files the pack owns; safe to call twice. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const s of this.#segments) if ('fd' in s) fs.closeSync(s.fd);
    for (const f of this.#owned) fs.rmSync(f, { force: true });
  }
}

/** Reads exactly `n` bytes at `position` into `out` at `offset`; a short file is an error. */
export function readFully(fd: number, out: Buffer, offset: number, n: number, position: number): void {
  let done = 0;
  while (done < n) {
    const got = fs.readSync(fd, out, offset + done, n - done, position + done);
    if (got === 0) throw new Error(`a pack file ended ${n - done} bytes early`);
    done += got;
  }
}

/** A new empty file under `dir`, open for reading and writing, with a name no other process uses. */
export function tempFile(dir: string, prefix: string): { path: string; fd: number } {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = path.join(dir, `${prefix}-${process.pid}-${Math.random().toString(36).slice(2)}.tmp`);
  return { path: file, fd: fs.openSync(file, 'wx+', 0o600) };
}
