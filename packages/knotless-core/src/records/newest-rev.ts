// No going back (format.md, "The ref table", "Verified"): a proof is the account's signed commit, and
// an older commit stays validly signed forever, so a PDS or a proxy could answer with one to bring
// back a deleted branch or hide a push. The cache keeps, per account, the newest commit `rev` this
// machine verified, with the PDS and the key it was verified at; a proof at an older `rev` is refused
// unless the DID document now names another PDS (the account moved) or another key (it rotated), in
// which case the newer history starts there.
import path from 'node:path';
import { readJson, writeFileAtomic } from '../fsutil.ts';
import { safeText } from '../text/terminal.ts';
import { unverified } from './verified-read.ts';

/** The newest verified commit of one account, and where it was verified. */
interface Mark {
  rev: string;
  pds: string;
  key: string;
}

function isMark(value: unknown): value is Mark {
  const m = value as Partial<Mark> | null | undefined;
  return typeof m?.rev === 'string' && typeof m.pds === 'string' && typeof m.key === 'string';
}

/** One command's guard of one account: check each proof's rev, then save the newest. */
export class NewestRev {
  readonly #file: string | undefined;
  readonly #at: { pds: string; key: string };
  readonly #name: string;
  readonly #mark: Mark | undefined;
  #newest: string | undefined;

  /**
   * The guard of `did` in `dir` (none when `dir` is undefined: nothing is kept), for proofs checked
   * against `key` from the PDS `pds` the DID document names now; `name` is how messages name the
   * repository read.
   */
  constructor(dir: string | undefined, did: string, at: { pds: string; key: string }, name: string) {
    this.#file = dir === undefined ? undefined : path.join(dir, `${encodeURIComponent(did)}.json`);
    this.#at = at;
    this.#name = name;
    const mark = this.#file === undefined ? undefined : readJson<unknown>(this.#file);
    // A mark of another PDS or key says nothing about this history: the account moved or rotated.
    this.#mark = isMark(mark) && mark.pds === at.pds && mark.key === at.key ? mark : undefined;
  }

  /** Refuses a proof at a commit older than the newest this machine verified of the account. */
  check(rev: string): void {
    if (this.#mark !== undefined && rev < this.#mark.rev)
      throw unverified(
        this.#name,
        `the PDS answered with the account's commit ${safeText(rev, 40)}, older than ${safeText(this.#mark.rev, 40)} already verified on this machine`,
      );
    if (this.#newest === undefined || rev > this.#newest) this.#newest = rev;
  }

  /** Keeps the newest rev checked, when it is newer than the mark (or the mark is of another PDS or key). */
  save(): void {
    if (this.#file === undefined || this.#newest === undefined) return;
    if (this.#mark !== undefined && this.#newest <= this.#mark.rev) return;
    writeFileAtomic(this.#file, `${JSON.stringify({ rev: this.#newest, ...this.#at })}\n`);
  }
}
