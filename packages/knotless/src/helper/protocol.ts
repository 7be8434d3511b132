import fs from 'node:fs';

/**
 * Reads git's commands line by line. stdout belongs to git: only protocol answers are written
 * there, through {@link answer}.
 */
export class CommandReader {
  // A hand-made line splitter: node:readline would add ~10 ms to every git command's start-up.
  readonly #input: NodeJS.ReadableStream;
  readonly #lines: string[] = [];
  #buffer = '';
  #ended = false;
  #wake: (() => void) | undefined;

  constructor(input: NodeJS.ReadableStream) {
    this.#input = input;
    input.setEncoding('utf8');
    input.on('data', (chunk: string) => {
      this.#buffer += chunk;
      const parts = this.#buffer.split('\n');
      this.#buffer = parts.pop()!;
      this.#lines.push(...parts);
      this.#wake?.();
    });
    input.on('end', () => {
      this.#ended = true;
      this.#wake?.();
    });
  }

  /** The next line, or undefined when git closed our stdin. */
  async next(): Promise<string | undefined> {
    while (this.#lines.length === 0 && !this.#ended) {
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
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

  /** Stops reading (lets the process exit). */
  close(): void {
    this.#input.pause();
  }
}

/**
 * git's end of our stdin. When it is a pipe (always, under git) a socket is opened on it directly:
 * setting up process.stdin costs every git command about 5 ms more.
 */
export function commandInput(): NodeJS.ReadableStream {
  const stat = fs.fstatSync(0);
  if (!stat.isFIFO() && !stat.isSocket()) return process.stdin;
  const net = process.getBuiltinModule('node:net');
  return new net.Socket({ fd: 0, readable: true, writable: false });
}

/**
 * Writes protocol lines to git, synchronously: git waits for each answer before its next command,
 * and setting up process.stdout as a stream costs every git command a few milliseconds.
 */
export function answer(lines: string[]): void {
  const data = Buffer.from(lines.map((l) => l + '\n').join(''));
  for (let done = 0; done < data.length;) {
    try {
      done += fs.writeSync(1, data, done);
    } catch (err) {
      // A non-blocking pipe that git has not drained yet: try again.
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
    }
  }
}
