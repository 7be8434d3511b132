import fs from 'node:fs';
import path from 'node:path';
import { isMissing, writeFileAtomic } from '../fsutil.ts';
import { blobMatchesCid } from '../packs/cid.ts';

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
}
