import tty from 'node:tty';
import { readLineSync, writeAllSync, writeStderr } from 'knotless-core/text/fd-io';
import { safeLine } from 'knotless-core/text/terminal';

/** Where a command writes: results to stdout, messages to stderr; stdin for prompts. */
export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** One line of stdin when it is not a terminal (a password piped in by a script). */
  readLine(): Promise<string>;
  /** The terminal on stdin, when there is one (prompts read it without echo). */
  terminal(): NodeJS.ReadStream | undefined;
  interactive: boolean;
}

/**
 * The process's own descriptors, written and read as they are: no stream is made on a pipe we
 * inherited (it would turn the pipe non-blocking for every process sharing it, see
 * knotless-core's text/fd-io.ts). Only a terminal gets a stream, for prompts: Node opens the
 * terminal again for it, leaving the inherited descriptor alone.
 */
export function processIo(): Io {
  const stdinIsTerminal = tty.isatty(0);
  return {
    // The CLI's two sinks; main() hands commands these through safeIo.
    out: (line) => {
      try {
        writeAllSync(1, line + '\n');
      } catch (err) {
        // A reader that went away (`knotless --help | head -3`) ends us as it ends git: quietly,
        // with the status of a SIGPIPE. Any other failure to write stays an error.
        if ((err as NodeJS.ErrnoException).code !== 'EPIPE') throw err;
        process.exit(141);
      }
    },
    err: (line) => writeStderr(line + '\n'),
    readLine: () => Promise.resolve(readLineSync(0)),
    // eslint-disable-next-line no-restricted-syntax -- a terminal only: its stream reopens the tty
    terminal: () => (stdinIsTerminal ? process.stdin : undefined),
    interactive: stdinIsTerminal && tty.isatty(2),
  };
}

/**
 * `io` with every line escaped on its way out ({@link safeLine}): a command may print text from the
 * network only through here, so one hostile field cannot act on the terminal even where a command
 * forgot to escape it. One call is one line; a line break inside is shown as `\n`.
 */
export function safeIo(io: Io): Io {
  return {
    out: (line) => io.out(safeLine(line)),
    err: (line) => io.err(safeLine(line)),
    readLine: () => io.readLine(),
    terminal: () => io.terminal(),
    interactive: io.interactive,
  };
}
