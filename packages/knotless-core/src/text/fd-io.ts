import fs from 'node:fs';
import { currentCaller } from '../caller/scope.ts';

/**
 * Plain writes and reads on the descriptors a process inherits (0, 1, 2), leaving them as they were.
 *
 * A Node stream on an inherited pipe (process.stdout, process.stderr, process.stdin, a net.Socket
 * on fd 0) switches the pipe to non-blocking. That flag belongs to the pipe, not to us: git, sharing
 * it under `2>&1`, then gets EAGAIN on its own writes and drops its output. So nothing here makes a
 * stream: writes are fs.writeSync, and when a parent already made the descriptor non-blocking, a
 * full pipe (EAGAIN) is waited out, never spun on and never dropped. Being synchronous, nothing is
 * left queued when the process exits right after.
 */

const pause = new Int32Array(new SharedArrayBuffer(4));

/** Sleeps the thread (no CPU) for `ms`: the wait between tries on a full non-blocking pipe. */
function sleepSync(ms: number): void {
  Atomics.wait(pause, 0, 0, ms);
}

function isAgain(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'EAGAIN' || code === 'EWOULDBLOCK';
}

/** Writes all of `data` to `fd`, waiting (1 ms, doubling to 50 ms) whenever the pipe is full. */
export function writeAllSync(fd: number, data: string | Uint8Array): void {
  const buf = typeof data === 'string' ? Buffer.from(data) : data;
  let wait = 1;
  for (let done = 0; done < buf.length;) {
    try {
      done += fs.writeSync(fd, buf, done);
      wait = 1;
    } catch (err) {
      if (!isAgain(err)) throw err;
      sleepSync(wait);
      wait = Math.min(wait * 2, 50);
    }
  }
}

/**
 * Writes to our stderr, or to the caller's when the work is done for another process (the warm agent
 * running a helper's commands, see caller/scope.ts). A stderr nobody reads any more (EPIPE) cannot be
 * told anything, so that one failure is let go; any other is thrown.
 */
export function writeStderr(text: string): void {
  const caller = currentCaller();
  if (caller !== undefined) return caller.stderr(text);
  try {
    writeAllSync(2, text);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
  }
}

/**
 * Reads up to `buf.length` bytes from `fd` without blocking the event loop (the read runs on
 * libuv's thread pool, as a blocking read) and without touching the descriptor's flags. 0 at the
 * end. A descriptor a parent made non-blocking is waited on between tries.
 */
export async function readSome(fd: number, buf: Buffer): Promise<number> {
  let wait = 1;
  for (;;) {
    try {
      return await new Promise<number>((resolve, reject) =>
        fs.read(fd, buf, 0, buf.length, null, (err, n) => (err ? reject(err) : resolve(n))),
      );
    } catch (err) {
      if (!isAgain(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 50);
    }
  }
}

/**
 * One line from `fd` (without its line break; '' at the end), read a byte at a time so that
 * nothing after the line is consumed from a descriptor others may read next.
 */
export function readLineSync(fd: number): string {
  const bytes: number[] = [];
  const one = Buffer.alloc(1);
  let wait = 1;
  for (;;) {
    let n: number;
    try {
      n = fs.readSync(fd, one, 0, 1, null);
    } catch (err) {
      if (!isAgain(err)) throw err;
      sleepSync(wait);
      wait = Math.min(wait * 2, 50);
      continue;
    }
    if (n === 0 || one[0] === 0x0a) break;
    bytes.push(one[0]!);
  }
  return Buffer.from(bytes).toString('utf8').replace(/\r$/, '');
}
