import fs from 'node:fs';
import path from 'node:path';
import { isMissing, writeFileAtomic } from '../fsutil.ts';
import { indexPack, packObjects } from '../git/pack.ts';
import type { PackFile } from '../git/pack-file.ts';
import { GitError, runGit } from '../git/run.ts';
import { KnotlessError } from '../errors.ts';
import type { PackEntry } from '../records/ref-record.ts';
import { BlobCache } from './blob-cache.ts';
import { noteCacheGrowth } from './budget.ts';
import { IndexedPacks } from './indexed-packs.ts';
import { lockMirror } from './mirror-lock.ts';
import { MIRROR_STAMP } from './usage.ts';

/**
 * A bare repository in the cache holding a remote repository's packs, for work that needs the
 * objects without a clone: compaction and `repo commit`, which work in it only inside {@link hold}.
 * Eviction deletes it only when nobody holds it; it is rebuilt from the packs (which the blob cache
 * usually still has).
 */
export class Mirror {
  readonly gitDir: string;
  readonly #indexed: IndexedPacks;
  readonly #blobs: BlobCache;
  #creating: Promise<void> | undefined;

  constructor(cacheDir: string, did: string, repo: string) {
    this.gitDir = path.join(cacheDir, 'mirrors', did.replaceAll(':', '_'), `${repo}.git`);
    this.#indexed = new IndexedPacks(this.gitDir);
    this.#blobs = new BlobCache(cacheDir);
  }

  /** The name git gave a pack's local copy (its checksum; another after --fix-thin added bases). */
  #localFile(id: string): string {
    return path.join(this.gitDir, 'knotless', 'local', id);
  }

  #packFile(hash: string, ext = 'pack'): string {
    return path.join(this.gitDir, 'objects', 'pack', `pack-${hash}.${ext}`);
  }

  /** Notes where a pack's objects now are (its local name, what it carries), and shares its bytes. */
  #record(pack: PackEntry, hash: string, objects: string[]): void {
    writeFileAtomic(this.#localFile(pack.id), hash, 0o644);
    writeFileAtomic(this.#listFile(pack.id), objects.join('\n'), 0o644);
    this.#indexed.add(pack.id);
    this.share(pack);
  }

  /**
   * When git kept a pack unchanged (its local name is its checksum, the pack's id) and it travels as
   * one blob, makes the cached blob and the mirror's pack one file: the pack takes its bytes once on
   * disk. A pack of several blobs, or one --fix-thin completed, stays in both.
   */
  share(pack: PackEntry): void {
    const part = pack.parts?.length === 1 ? pack.parts[0] : undefined;
    if (part === undefined || part.size !== pack.size) return;
    if (this.#localName(pack.id) === pack.id) this.#blobs.share(part.ref.$link, this.#packFile(pack.id));
  }

  #localName(id: string): string | undefined {
    try {
      const hash = fs.readFileSync(this.#localFile(id), 'utf8').trim();
      return /^[0-9a-f]{40,64}$/.test(hash) ? hash : undefined;
    } catch (err) {
      // Not indexed here, or before local names were recorded.
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  #listFile(id: string): string {
    return path.join(this.gitDir, 'knotless', 'objects', id);
  }

  /**
   * Runs `fn` holding the mirror against eviction (and against other processes' work in it, which
   * waits), and stamps its last use for least-recently-used eviction.
   */
  async hold<T>(fn: () => Promise<T>): Promise<T> {
    const release = await lockMirror(this.gitDir, true);
    try {
      return await fn();
    } finally {
      // Stamped whatever happened, even when fn failed: it was used, and may have grown.
      if (fs.existsSync(path.join(this.gitDir, 'HEAD'))) {
        writeFileAtomic(path.join(this.gitDir, MIRROR_STAMP), '', 0o644);
        noteCacheGrowth(1);
      }
      await release!();
    }
  }

  /** Makes the bare repository if it is not there yet. */
  async create(): Promise<void> {
    if (fs.existsSync(path.join(this.gitDir, 'HEAD'))) return;
    this.#creating ??= (async () => {
      fs.mkdirSync(path.dirname(this.gitDir), { recursive: true });
      await runGit(['init', '-q', '--bare', '--object-format=sha1', this.gitDir]);
    })();
    await this.#creating;
  }

  /** Indexes, in order, the packs of `list` the mirror lacks; `load` supplies each (closed once indexed). */
  async sync(list: PackEntry[], load: (pack: PackEntry) => Promise<PackFile>): Promise<void> {
    await this.create();
    const done = this.#indexed.read();
    for (const pack of list) {
      if (done.has(pack.id) && fs.existsSync(this.#listFile(pack.id))) continue;
      const file = await load(pack);
      const { hash } = await indexPack(file, this.gitDir, false)
        .finally(() => file.close())
        .catch((err: unknown) => {
          // A pack the checks let through but git cannot index: the remote's data, not a bug here.
          if (!(err instanceof GitError)) throw err;
          throw new KnotlessError(
            'corrupt-remote',
            `git could not index pack ${pack.id} (${err.stderr.trim().split('\n').pop() ?? ''}): the remote's packs are damaged or lack their delta bases; nothing was written.`,
            { cause: err },
          );
        });
      this.#record(pack, hash, await packObjects(this.gitDir, hash, pack.count));
      // Its trees may name blobs of packs not downloaded yet: promised, to git, not missing.
      writeFileAtomic(this.#packFile(hash, 'promisor'), '', 0o644);
    }
  }

  /**
   * Records a pack git indexed into this mirror from elsewhere (a compaction's merged pack), so that
   * no sync indexes it again: `hash` is its local name, `objects` what it carries.
   */
  adoptIndexed(pack: PackEntry, hash: string, objects: string[]): void {
    this.#record(pack, hash, objects);
  }

  /**
   * Deletes the local copies of packs a compaction replaced by `merged`, which hold every object
   * they carried: the mirror keeps each object once. Their object lists stay, so a ref that still
   * lists one of them syncs without indexing it again (its objects are in the merged pack). Called
   * inside {@link hold}, after the merged pack was indexed here.
   */
  retire(ids: string[], merged: string[]): void {
    const keep = new Set(merged.map((m) => this.#localName(m)));
    for (const id of ids) {
      const hash = this.#localName(id);
      if (hash === undefined || keep.has(hash)) continue;
      // The index first: without it git no longer looks in the pack.
      for (const ext of ['idx', 'rev', 'pack', 'keep', 'promisor'])
        fs.rmSync(this.#packFile(hash, ext), { force: true });
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

  /**
   * Makes the mirror a promisor repository (gitrepository-layout, partial-clone.txt): git then
   * takes objects its packs lack but name (the blobs of packs not downloaded) as promised, not
   * missing. The remote has no URL: nothing in the mirror is ever fetched by git itself.
   */
  async makePromisor(): Promise<void> {
    const config = path.join(this.gitDir, 'config');
    if (fs.readFileSync(config, 'utf8').includes('partialclone = knotless')) return;
    for (const [key, value] of [
      ['core.repositoryformatversion', '1'],
      ['remote.knotless.promisor', 'true'],
      ['extensions.partialClone', 'knotless'],
    ] as const)
      await runGit(['config', key, value], { gitDir: this.gitDir });
  }

  /** Whether every pack of `list` is indexed here. */
  holdsAll(list: PackEntry[]): boolean {
    const done = this.#indexed.read();
    return list.every((p) => done.has(p.id));
  }

  /**
   * The objects of `oids` no pack indexed here carries, from the lists the mirror keeps: asking git
   * would have it try to fetch what a promisor repository lacks.
   */
  lacks(oids: string[]): string[] {
    const held = new Set<string>();
    for (const id of this.#indexed.read()) {
      try {
        for (const oid of this.objectsOf(id)) held.add(oid);
      } catch (err) {
        // Indexed before object lists were kept: its objects count as lacking, and it is synced.
        if (!isMissing(err)) throw err;
      }
    }
    return oids.filter((o) => !held.has(o));
  }

  /** The objects a synced pack carries. */
  objectsOf(id: string): string[] {
    return fs.readFileSync(this.#listFile(id), 'utf8').split('\n').filter(Boolean);
  }
}
