import fs from 'node:fs';
import path from 'node:path';
import { writeFileAtomic } from '../fsutil.ts';
import { indexPack, packObjects } from '../git/pack.ts';
import { GitError, runGit } from '../git/run.ts';
import { KnotlessError } from '../errors.ts';
import type { PackEntry } from '../records/ref-record.ts';
import { IndexedPacks } from './indexed-packs.ts';

/**
 * A bare repository in the cache holding a remote repository's packs, for work that needs the
 * objects without a clone: compaction and `repo commit`. It can be deleted at any time; it is
 * rebuilt from the packs (which the blob cache usually still has).
 */
export class Mirror {
  readonly gitDir: string;
  readonly #indexed: IndexedPacks;
  #creating: Promise<void> | undefined;

  constructor(cacheDir: string, did: string, repo: string) {
    this.gitDir = path.join(cacheDir, 'mirrors', did.replaceAll(':', '_'), `${repo}.git`);
    this.#indexed = new IndexedPacks(this.gitDir);
  }

  #listFile(id: string): string {
    return path.join(this.gitDir, 'knotless', 'objects', id);
  }

  /** Makes the bare repository if it is not there yet. */
  async create(): Promise<void> {
    if (fs.existsSync(path.join(this.gitDir, 'HEAD'))) return;
    this.#creating ??= (async () => {
      fs.mkdirSync(path.dirname(this.gitDir), { recursive: true });
      await runGit(['init', '-q', '--bare', this.gitDir]);
    })();
    await this.#creating;
  }

  /** Indexes, in order, the packs of `list` the mirror lacks; `load` supplies their bytes. */
  async sync(list: PackEntry[], load: (pack: PackEntry) => Promise<Uint8Array>): Promise<void> {
    await this.create();
    const done = this.#indexed.read();
    for (const pack of list) {
      if (done.has(pack.id) && fs.existsSync(this.#listFile(pack.id))) continue;
      const bytes = await load(pack);
      const { hash } = await indexPack(bytes, this.gitDir, false).catch((err: unknown) => {
        // A pack the checks let through but git cannot index: the remote's data, not a bug here.
        if (!(err instanceof GitError)) throw err;
        throw new KnotlessError(
          'corrupt-remote',
          `git could not index pack ${pack.id} (${err.stderr.trim().split('\n').pop() ?? ''}): the remote's packs are damaged or lack their delta bases; nothing was written.`,
          { cause: err },
        );
      });
      writeFileAtomic(
        this.#listFile(pack.id),
        (await packObjects(this.gitDir, hash, pack.count)).join('\n'),
        0o644,
      );
      this.#indexed.add(pack.id);
    }
  }

  /**
   * Records a pack whose objects were made in this mirror (a `repo commit`), so that the next sync
   * need not index it again: `objects` is what it carries.
   */
  adopt(id: string, objects: string[]): void {
    writeFileAtomic(this.#listFile(id), objects.join('\n'), 0o644);
    this.#indexed.add(id);
  }

  /** The objects a synced pack carries. */
  objectsOf(id: string): string[] {
    return fs.readFileSync(this.#listFile(id), 'utf8').split('\n').filter(Boolean);
  }
}
