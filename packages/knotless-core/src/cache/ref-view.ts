import fs from 'node:fs';
import path from 'node:path';
import { isKnotlessError } from '../errors.ts';
import { readJson, writeFileAtomic } from '../fsutil.ts';
import { parseRefRecord, writeRefRecord } from '../records/ref-record.ts';
import type { RemoteRef } from '../records/remote-repo.ts';

interface ViewFile {
  refs: Array<{ key: string; cid: string; record: unknown }>;
}

/** A repository's refs as last seen (listed, or written by this machine). */
export interface View {
  refs: RemoteRef[];
}

/**
 * The last known refs of one remote repository, on disk. Never an answer to git's `list for-push`
 * (git decides "up to date", deletes and leases from that answer, before any compare-and-swap): only
 * `knotless repo commit` reads it, which decides nothing locally. It writes one branch with
 * compare-and-swap against the record it read here, and builds on that same record's packs, so a
 * stale view costs a conflict and a re-read, never a lost commit or a pack that is gone (the PDS
 * checks the swap before the blobs).
 */
export class RefView {
  readonly #file: string;

  constructor(cacheDir: string, did: string, repo: string) {
    this.#file = path.join(cacheDir, 'views', did.replaceAll(':', '_'), `${repo}.json`);
  }

  /** The view, or undefined when there is none or it cannot be read. */
  read(): View | undefined {
    const data = readJson<ViewFile>(this.#file);
    if (data === undefined || !Array.isArray(data.refs)) return undefined;
    try {
      return {
        refs: data.refs.map((r) => ({ key: r.key, cid: r.cid, record: parseRefRecord(r.record) })),
      };
    } catch (err) {
      // A record that no longer parses (a file of an older version, damage): the view is a cache,
      // and a missing one means listing.
      if (isKnotlessError(err)) return undefined;
      throw err;
    }
  }

  /** Forgets the view (the repository's refs moved into its ref table, which no view here holds). */
  clear(): void {
    fs.rmSync(this.#file, { force: true });
  }

  /** Replaces the view. */
  write(view: View): void {
    const data: ViewFile = {
      refs: view.refs.map((r) => ({ key: r.key, cid: r.cid, record: writeRefRecord(r.record) })),
    };
    writeFileAtomic(this.#file, JSON.stringify(data), 0o644);
  }
}
