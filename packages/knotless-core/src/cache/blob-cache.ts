import fs from 'node:fs';
import path from 'node:path';
import { isMissing, writeFileAtomic } from '../fsutil.ts';
import { READ_CHUNK, readFully, tempFile, type ByteSource } from '../git/pack-file.ts';
import { CidHasher, blobMatchesCid } from '../packs/cid.ts';

/**
 * Downloaded blobs by CID, shared by every git process of the user. Each file is written whole
 * (temp file, then rename) and checked against its CID when read, so concurrent use is safe and a
 * damaged or half-deleted cache only costs a download. Deleting the directory at any time is safe.
 */
export class BlobCache {
  readonly #dir: string;

  constructor(cacheDir: string) {
    this.#dir = path.join(cacheDir, 'blobs');
  }

  #file(cid: string): string {
    return path.join(this.#dir, cid.replace(/[^a-z0-9]/gi, ''));
  }

  /** The bytes of a cached blob, or undefined when absent or damaged. */
  get(cid: string): Buffer | undefined {
    let bytes: Buffer;
    try {
      bytes = fs.readFileSync(this.#file(cid));
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    return blobMatchesCid(bytes, cid) ? bytes : undefined;
  }

  /** Stores a blob whose bytes were already checked against its CID. */
  put(cid: string, bytes: Uint8Array): void {
    writeFileAtomic(this.#file(cid), bytes, 0o644);
  }

  /** Where blobs being downloaded are written before they are checked (on the cache's disk). */
  get tempDir(): string {
    return path.join(path.dirname(this.#dir), 'tmp');
  }

  /**
   * A cached blob opened for reading, checked against its CID by reading it once in pieces (never
   * whole in memory); undefined when absent or damaged. The descriptor keeps its bytes even if the
   * file is evicted meanwhile; the caller closes it.
   */
  open(cid: string): { fd: number; size: number } | undefined {
    let fd: number;
    try {
      fd = fs.openSync(this.#file(cid), 'r');
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    try {
      const size = fs.fstatSync(fd).size;
      const hash = new CidHasher();
      const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK, Math.max(1, size)));
      for (let at = 0; at < size; at += buf.length) {
        const n = Math.min(buf.length, size - at);
        readFully(fd, buf, 0, n, at);
        hash.update(buf.subarray(0, n));
      }
      if (hash.cid() === cid) return { fd, size };
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
    fs.closeSync(fd);
    return undefined;
  }

  /** Moves a downloaded file, already checked against its CID, into the cache. */
  adopt(cid: string, file: string): void {
    fs.mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(file, 0o644);
    fs.renameSync(file, this.#file(cid));
  }

  /** Stores `length` bytes of `src` from `at` as a blob (an uploaded part), a piece at a time. */
  putRange(cid: string, src: ByteSource, at: number, length: number): void {
    const tmp = tempFile(this.tempDir, 'put');
    const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK, Math.max(1, length)));
    try {
      for (let off = 0; off < length; off += READ_CHUNK) {
        const piece = src.readInto(buf.subarray(0, Math.min(READ_CHUNK, length - off)), at + off);
        fs.writeSync(tmp.fd, piece, 0, piece.length, off);
      }
    } catch (err) {
      fs.closeSync(tmp.fd);
      fs.rmSync(tmp.path, { force: true });
      throw err;
    }
    fs.closeSync(tmp.fd);
    this.adopt(cid, tmp.path);
  }
}
