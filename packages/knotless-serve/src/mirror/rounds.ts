import fs from 'node:fs';
import path from 'node:path';
import type { StoredRound as Round } from '../db/schema.ts';
import { presentObjects, whole, wholeObjects } from './objects.ts';
import type { Slots } from './queue.ts';
import { loadRoundPack, RoundUnavailable, type RoundPackDeps } from './round-packs.ts';

/**
 * Pull request rounds in their target repositories' mirrors: each round's pack downloaded once
 * (one download per pack at a time), fetched ahead as its record comes in, and a head known whole
 * not asked about again on each view.
 */
export class Rounds {
  readonly #deps: RoundPackDeps;
  readonly #slots: Slots;
  readonly #log: (line: string) => void;
  readonly #loading = new Map<string, Promise<void>>();
  /** Heads known whole in a mirror (`gitDir` and head): a mirror is never gc'd. */
  readonly #whole = new Set<string>();
  /** Downloads started as records came in. */
  readonly #ahead = new Set<Promise<void>>();

  constructor(deps: RoundPackDeps, slots: Slots, log: (line: string) => void) {
    this.#deps = deps;
    this.#slots = slots;
    this.#log = log;
  }

  /**
   * Fetches a pull request's newest round into its target's mirror (`gitDir`, named `label` in the
   * log) as soon as the record is indexed, so that its page does not wait for the download. Behind
   * the syncs (a pull request costs its author nothing to write; pushes go first); a round that
   * cannot be had is the page's to explain, and only logged here.
   */
  ahead(authorDid: string, gitDir: string, label: string, round: Round): void {
    const p: Promise<void> = this.#slots
      .run(false, async () => {
        if (fs.existsSync(path.join(gitDir, 'HEAD'))) await this.load(authorDid, gitDir, round);
      })
      .catch((err: unknown) =>
        this.#log(
          `a pull request round of ${authorDid} into ${label}: ${err instanceof Error ? err.message : String(err)}`,
        ),
      )
      .finally(() => this.#ahead.delete(p));
    this.#ahead.add(p);
  }

  /** The downloads started ahead that are still running. */
  running(): Promise<void>[] {
    return [...this.#ahead];
  }

  /** Forgets the heads known whole (a mirror was deleted). */
  forget(): void {
    this.#whole.clear();
  }

  /**
   * Makes sure a round's commits are in the target repository's mirror, fetching the round's pack
   * from its author's PDS when its head is missing.
   */
  async load(authorDid: string, gitDir: string, round: Round): Promise<void> {
    const known = `${gitDir}\n${round.head}`;
    if (this.#whole.has(known)) return;
    if ((await wholeObjects(gitDir, [round.head])).has(round.head)) return this.#remember(known);
    const key = `${gitDir}\n${round.pack.cid}`;
    let p = this.#loading.get(key);
    if (p === undefined) {
      p = loadRoundPack(this.#deps, authorDid, gitDir, round).finally(() => this.#loading.delete(key));
      this.#loading.set(key, p);
    }
    await p;
    if (await whole(gitDir, [round.head])) return this.#remember(known);
    if (!(await presentObjects(gitDir, [round.head])).has(round.head))
      throw new RoundUnavailable(`the round's pack does not hold its head ${round.head}`);
    throw new RoundUnavailable(`the round's pack lacks objects its head ${round.head} needs`);
  }

  #remember(key: string): void {
    if (this.#whole.size >= 100_000) this.#whole.clear();
    this.#whole.add(key);
  }
}
