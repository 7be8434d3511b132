import { readSome, writeAllSync } from 'knotless-core/text/fd-io';
import type { AgentHost } from '../agent/client.ts';

/** Where git's bytes come from: a descriptor, or pieces handed over (undefined at the end). */
export type CommandSource = number | (() => Promise<Uint8Array | undefined>);

/**
 * Reads git's commands line by line from our stdin (or, in the warm agent, from what a thin helper
 * forwards of its stdin). stdout belongs to git: only protocol answers
 * are written there, through {@link answer}.
 *
 * No stream is opened on stdin (a socket or process.stdin would make git's pipe non-blocking, and
 * node:readline would add ~10 ms to every git command's start-up): plain reads on fd 0, on libuv's
 * thread pool, split into lines by hand.
 */
export class CommandReader {
  readonly #pull: () => Promise<Uint8Array | undefined>;
  readonly #lines: string[] = [];
  readonly #chunk = Buffer.alloc(64 * 1024);
  readonly #decoder = new TextDecoder('utf-8');
  #buffer = '';
  #ended = false;

  constructor(source: CommandSource = 0) {
    this.#pull = typeof source === 'number' ? () => this.#read(source) : source;
  }

  async #read(fd: number): Promise<Uint8Array | undefined> {
    const n = await readSome(fd, this.#chunk);
    return n === 0 ? undefined : this.#chunk.subarray(0, n);
  }

  /** The next line, or undefined when git closed our stdin. */
  async next(): Promise<string | undefined> {
    while (this.#lines.length === 0 && !this.#ended) {
      const piece = await this.#pull();
      if (piece === undefined) {
        this.#ended = true;
        this.#buffer += this.#decoder.decode();
        break;
      }
      this.#buffer += this.#decoder.decode(piece, { stream: true });
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

  /**
   * git's bytes as they come, for a stateless connection (helper/connect.ts) that follows the line
   * it was asked for in: first what was read past that line, then each piece as read (undefined at
   * the end). git writes only text before it, so the text read ahead is its bytes again.
   */
  readonly bytes = async (): Promise<Uint8Array | undefined> => {
    if (this.#lines.length > 0 || this.#buffer !== '') {
      const text = this.#lines.map((l) => `${l}\n`).join('') + this.#buffer;
      this.#lines.length = 0;
      this.#buffer = '';
      return Buffer.from(text, 'utf8');
    }
    if (this.#ended) return undefined;
    const piece = await this.#pull();
    if (piece === undefined) {
      this.#ended = true;
      return undefined;
    }
    // A copy: the descriptor's reader reuses its buffer for the next read.
    return Buffer.from(piece);
  };

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

/** Writes bytes to git as they are (a stateless connection's answers), synchronously as {@link answer}. */
export function writeBytes(bytes: Uint8Array): void {
  writeAllSync(1, bytes);
}

/** How one run of the helper meets git: its commands, where its answers go, its environment. */
export interface HelperIo {
  reader: Pick<CommandReader, 'next' | 'batch' | 'bytes'>;
  answer: (lines: string[]) => void;
  /** Writes bytes to git (a stateless connection's answers: packs, not lines). */
  write: (bytes: Uint8Array) => void;
  env: NodeJS.ProcessEnv;
  /**
   * Inside the warm agent, the agent itself: the process, its connections and its exit belong to it.
   * Undefined in a helper process of its own.
   */
  hosted: AgentHost | undefined;
}

/** A helper process of its own: git's commands on fd 0, answers on fd 1. */
export function gitIo(): HelperIo {
  return { reader: new CommandReader(), answer, write: writeBytes, env: process.env, hosted: undefined };
}
