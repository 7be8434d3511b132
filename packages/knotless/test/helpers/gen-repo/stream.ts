// Writing a `git fast-import` stream: a buffering sink, and the fast-import process it feeds.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Writable } from 'node:stream';

/** Buffers the stream and hands it to fast-import in large writes, waiting when its pipe is full. */
export class Sink {
  #out: Writable;
  #exited: Promise<unknown>;
  #gone = false;
  #chunks: Buffer[] = [];
  #size = 0;

  constructor(out: Writable, exited: Promise<unknown>) {
    this.#out = out;
    this.#exited = exited;
    exited.then(
      () => (this.#gone = true),
      () => (this.#gone = true),
    );
  }

  text(s: string): void {
    this.raw(Buffer.from(s, 'utf8'));
  }

  raw(b: Buffer): void {
    this.#chunks.push(b);
    this.#size += b.length;
  }

  /** A fast-import `data` command: exact byte count, so content may hold anything. */
  data(content: string | Buffer): void {
    const b = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    this.text(`data ${b.length}\n`);
    this.raw(b);
    this.text('\n');
  }

  async flush(force = false): Promise<void> {
    if (this.#gone) throw new Error('git fast-import quit before the end of the stream');
    if (this.#size === 0 || (!force && this.#size < 1 << 20)) return;
    const buf = Buffer.concat(this.#chunks);
    this.#chunks = [];
    this.#size = 0;
    if (!this.#out.write(buf)) {
      // A fast-import that dies never drains; its exit ends the wait instead.
      await Promise.race([once(this.#out, 'drain'), this.#exited]);
    }
  }
}

/** Runs `git fast-import --quiet` with `args` in `dir`, on the stream `write` produces into its sink. */
export async function fastImport(
  dir: string,
  args: string[],
  env: Record<string, string>,
  write: (sink: Sink) => Promise<void>,
): Promise<void> {
  // Not runProcess: its input is one string, but this stream holds binary data and is written while it
  // is being made, at the pace fast-import reads it.
  const child = spawn('git', ['fast-import', '--quiet', ...args], {
    cwd: dir,
    env,
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  // A fast-import that dies mid-stream breaks the pipe, which says only that it quit; its stderr
  // says why, so that is what gets reported.
  child.stdin.on('error', () => {});
  try {
    await write(new Sink(child.stdin, exited));
  } catch (err) {
    child.kill();
    await exited.catch(() => {});
    if (stderr !== '') throw new Error(`git fast-import failed: ${stderr}`, { cause: err });
    throw err;
  }
  child.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`git fast-import exited with ${code}: ${stderr}`);
}
