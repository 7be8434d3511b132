import readline from 'node:readline';

/**
 * Reads git's commands line by line. stdout belongs to git: only protocol answers are written
 * there, through {@link answer}.
 */
export class CommandReader {
  readonly #lines: AsyncIterator<string>;

  constructor(input: NodeJS.ReadableStream) {
    const rl = readline.createInterface({ input, terminal: false, crlfDelay: Infinity });
    this.#lines = rl[Symbol.asyncIterator]();
  }

  /** The next line, or undefined when git closed our stdin. */
  async next(): Promise<string | undefined> {
    const r = await this.#lines.next();
    return r.done === true ? undefined : r.value;
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

/** Writes protocol lines to git. */
export function answer(lines: string[]): void {
  process.stdout.write(lines.map((l) => l + '\n').join(''));
}
