import { readSome, writeAllSync } from 'knotless-core/text/fd-io';

/**
 * Reads git's commands line by line from our stdin. stdout belongs to git: only protocol answers
 * are written there, through {@link answer}.
 *
 * No stream is opened on stdin (a socket or process.stdin would make git's pipe non-blocking, and
 * node:readline would add ~10 ms to every git command's start-up): plain reads on fd 0, on libuv's
 * thread pool, split into lines by hand.
 */
export class CommandReader {
  readonly #fd: number;
  readonly #lines: string[] = [];
  readonly #chunk = Buffer.alloc(64 * 1024);
  readonly #decoder = new TextDecoder('utf-8');
  #buffer = '';
  #ended = false;

  constructor(fd = 0) {
    this.#fd = fd;
  }

  /** The next line, or undefined when git closed our stdin. */
  async next(): Promise<string | undefined> {
    while (this.#lines.length === 0 && !this.#ended) {
      const n = await readSome(this.#fd, this.#chunk);
      if (n === 0) {
        this.#ended = true;
        this.#buffer += this.#decoder.decode();
        break;
      }
      this.#buffer += this.#decoder.decode(this.#chunk.subarray(0, n), { stream: true });
      const parts = this.#buffer.split('\n');
      this.#buffer = parts.pop()!;
      this.#lines.push(...parts);
    }
    return this.#lines.shift() ?? (this.#buffer !== '' ? this.#takeRest() : undefined);
  }

  #takeRest(): string {
    const rest = this.#buffer;
    this.#buffer = '';
    return rest;
  }

  /** Lines up to (not including) the blank line that ends a batch, starting with `first`. */
  async batch(first: string): Promise<string[]> {
    const lines = [first];
    for (;;) {
      const line = await this.next();
      if (line === undefined || line === '') return lines;
      lines.push(line);
    }
  }
}

/**
 * Writes protocol lines to git, synchronously: git waits for each answer before its next command.
 * A plain write on fd 1 that waits out a full pipe (see {@link writeAllSync}).
 */
export function answer(lines: string[]): void {
  writeAllSync(1, lines.map((l) => l + '\n').join(''));
}
