import fs from 'node:fs';
import { Writable } from 'node:stream';
import tty from 'node:tty';
import { writeAllSync } from 'knotless-core/text/fd-io';

/**
 * Replaces Node's `process.stdin`, `process.stdout` and `process.stderr` before anything reads them.
 *
 * Node makes those streams on first read, and on a pipe the stream is a net.Socket, which switches
 * the pipe to non-blocking: a flag of the pipe, shared with git under `2>&1`, whose own writes then
 * fail with EAGAIN and are dropped (exit 0). Our code never reads them (lint forbids it), but Node
 * does: node:net compares every socket it destroys with `process.stderr`, so the first HTTP
 * connection a fetch closed made git's shared pipe non-blocking; a dependency's console.warn would
 * too. Pipes and sockets get stand-ins here that write with plain blocking writes (fd-io) and read
 * through fs, which never change a descriptor's flags. Terminals and files keep Node's own streams:
 * Node opens a terminal afresh and writes files synchronously, so neither touches what is shared.
 *
 * `stdoutFd` is where writes to process.stdout go: the helper's stdout belongs to git's protocol,
 * so there a stray console.log is sent to stderr instead of corrupting it.
 */
export function keepInheritedStdio(stdoutFd: 1 | 2): void {
  replace('stdout', stdoutFd);
  replace('stderr', 2);
  if (shared(0))
    define('stdin', () => fs.createReadStream('', { fd: 0, autoClose: false, emitClose: false }));
}

/** A pipe or socket: a descriptor other processes may share, whose flags Node would change. */
function shared(fd: number): boolean {
  try {
    const st = fs.fstatSync(fd);
    return st.isFIFO() || st.isSocket();
  } catch (err) {
    // A closed descriptor: Node's own getter makes a stream that writes nowhere, as always.
    if ((err as NodeJS.ErrnoException).code === 'EBADF') return false;
    throw err;
  }
}

function replace(name: 'stdout' | 'stderr', fd: 1 | 2): void {
  const own = name === 'stdout' ? 1 : 2;
  if (!shared(own) && fd === own) return;
  define(name, () => new PlainWriter(fd));
}

/** Defines a lazy, cached getter for a stdio property in place of Node's. */
function define(name: 'stdin' | 'stdout' | 'stderr', make: () => unknown): void {
  let made: unknown;
  Object.defineProperty(process, name, {
    configurable: true,
    enumerable: true,
    get: () => (made ??= make()),
  });
}

/** A Writable over plain blocking writes to `fd`, with the fields libraries read off stdio. */
class PlainWriter extends Writable {
  readonly fd: number;
  readonly isTTY: boolean;
  constructor(fd: number) {
    super({ decodeStrings: true });
    this.fd = fd;
    this.isTTY = tty.isatty(fd);
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    try {
      writeAllSync(this.fd, chunk);
      done();
    } catch (err) {
      done(err as Error);
    }
  }
}
