import fs from 'node:fs';
import path from 'node:path';
import { isMissing } from '../fsutil.ts';

/**
 * The packs already indexed into one local repository ($GIT_DIR/knotless/indexed-packs), so that a
 * fetch downloads and indexes only packs it has not seen. A stale entry is harmless: if a thin pack
 * then lacks its bases, the fetch indexes the whole list again.
 */
export class IndexedPacks {
  readonly #file: string;

  constructor(gitDir: string) {
    this.#file = path.join(gitDir, 'knotless', 'indexed-packs');
  }

  /** The ids recorded so far. */
  read(): Set<string> {
    try {
      return new Set(fs.readFileSync(this.#file, 'utf8').split('\n').filter(Boolean));
    } catch (err) {
      if (isMissing(err)) return new Set();
      throw err;
    }
  }

  /** Records a pack as indexed. Appends are atomic for lines this short. */
  add(id: string): void {
    fs.mkdirSync(path.dirname(this.#file), { recursive: true });
    fs.appendFileSync(this.#file, id + '\n');
  }
}
