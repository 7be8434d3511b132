import fs from 'node:fs';
import path from 'node:path';
import { isMissing, writeFileAtomic } from '../fsutil.ts';
import { READ_CHUNK, readFully, tempFile, type ByteSource } from '../git/pack-file.ts';
import { CidHasher, blobMatchesCid } from '../records/cid.ts';
import { noteCacheGrowth } from './budget.ts';

let shared: Buffer | undefined;

/**
 * One buffer for the cache's synchronous reads (nothing else runs while one is used): a new
 * megabyte for each blob part was garbage V8 collected only after tens of them, so a push's peak
 * memory grew with its pack.
 */
function scratch(): Buffer {
  return (shared ??= Buffer.allocUnsafe(READ_CHUNK));
}

/**
 * Downloaded blobs by CID, shared by every git process of the user. Each file is written whole
 * (temp file, then rename) and checked against its CID when read, so concurrent use is safe and a
 * damaged or half-deleted cache only costs a download. Deleting the directory at any time is safe.
 * Named by CID, a blob is stored once however many packs, refs or repositories list it. A read
 * stamps the file's mtime: eviction (budget.ts) takes the least recently used first.
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
      // Never stored, or evicted (budget.ts): the caller downloads it again.
      if (isMissing(err)) return undefined;
      throw err;
    }
    if (!blobMatchesCid(bytes, cid)) return undefined;
    this.#touch(cid);
    return bytes;
  }

  #touch(cid: string): void {
    const now = new Date();
    try {
      fs.utimesSync(this.#file(cid), now, now);
    } catch (err) {
      // Evicted since it was read: the bytes in hand are whole, and nothing is left to stamp.
      if (!isMissing(err)) throw err;
    }
  }

  /**
   * Makes the cached blob `cid` the same file as `file` (a hard link), so that a pack held both here
   * and in a mirror takes its bytes once on disk. `file` must hold exactly the blob's bytes: a
   * mirror's pack that git indexed unchanged from this one blob (its name is its checksum).
   * The link is made beside the blob and renamed over it, so a reader sees one or the other, whole.
   */
  share(cid: string, file: string): void {
    const tmp = `${this.#file(cid)}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    try {
      fs.mkdirSync(this.#dir, { recursive: true, mode: 0o700 });
      fs.linkSync(file, tmp);
      fs.renameSync(tmp, this.#file(cid));
    } catch (err) {
      // Gone meanwhile (evicted), or a file system without hard links: two copies, as before.
      const code = (err as NodeJS.ErrnoException).code;
      if (!isMissing(err) && code !== 'EXDEV' && code !== 'EPERM' && code !== 'EMLINK') throw err;
      fs.rmSync(tmp, { force: true });
    }
  }

  /** Forgets a blob (a pack a compaction replaced): unlinked, so a reader that has it open keeps it. */
  drop(cid: string): void {
    fs.rmSync(this.#file(cid), { force: true });
  }

  /** Stores a blob whose bytes were already checked against its CID. */
  put(cid: string, bytes: Uint8Array): void {
    writeFileAtomic(this.#file(cid), bytes, 0o644);
    noteCacheGrowth(bytes.length);
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
      const buf = scratch();
      for (let at = 0; at < size; at += buf.length) {
        const n = Math.min(buf.length, size - at);
        readFully(fd, buf, 0, n, at);
        hash.update(buf.subarray(0, n));
      }
      if (hash.cid() === cid) {
        this.#touch(cid);
        return { fd, size };
      }
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
    const size = fs.statSync(file).size;
    fs.renameSync(file, this.#file(cid));
    noteCacheGrowth(size);
  }

  /** Stores `length` bytes of `src` from `at` as a blob (an uploaded part), a piece at a time. */
  putRange(cid: string, src: ByteSource, at: number, length: number): void {
    const tmp = tempFile(this.tempDir, 'put');
    const buf = scratch();
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
