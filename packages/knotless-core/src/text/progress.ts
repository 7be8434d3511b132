import { writeStderr } from './fd-io.ts';
import { printErr } from './terminal.ts';

/** How chatty the helper may be on stderr, as git asked with `option verbosity` and `option progress`. */
export interface Chatter {
  verbosity: number;
  progress: boolean;
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(2)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}

/** A progress meter drawn like git's own ("Title: 50% (1/2), 3.00 MiB"), on stderr, only when asked. */
export class Meter {
  readonly #title: string;
  readonly #total: number;
  readonly #on: boolean;
  #done = 0;
  #bytes = 0;

  constructor(chatter: Chatter, title: string, total: number) {
    this.#title = title;
    this.#total = total;
    this.#on = chatter.progress && chatter.verbosity > 0 && total > 0;
    this.#draw('\r');
  }

  /** Counts one more unit done (and the bytes it moved). */
  tick(bytes = 0): void {
    this.#done++;
    this.#bytes += bytes;
    this.#draw('\r');
  }

  /** Draws the final line. */
  end(): void {
    this.#draw(', done.\n');
  }

  #draw(tail: string): void {
    if (!this.#on) return;
    const pct = Math.floor((100 * this.#done) / this.#total);
    const bytes = this.#bytes > 0 ? `, ${size(this.#bytes)}` : '';
    // Our own words, redrawn in place with \r: not through printErr, which would escape the \r.
    writeStderr(`${this.#title}: ${String(pct).padStart(3)}% (${this.#done}/${this.#total})${bytes}${tail}`);
  }
}

/** Prints a message for the user on stderr unless git asked for quiet. */
export function say(chatter: Chatter, message: string): void {
  if (chatter.verbosity > 0) printErr(message);
}
