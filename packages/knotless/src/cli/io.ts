import { safeLine } from 'knotless-core/text/terminal';

/** Where a command writes: results to stdout, messages to stderr; stdin for prompts. */
export interface Io {
  out(line: string): void;
  err(line: string): void;
  stdin: NodeJS.ReadStream;
  interactive: boolean;
}

/** The process's own streams. */
export function processIo(): Io {
  // A reader that went away (`knotless --help | head -3`) ends us as it ends git: quietly, with the
  // status of a SIGPIPE. Any other failure to write stays an error.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(141);
  });
  return {
    // The CLI's two sinks; main() hands commands these through safeIo.
    // eslint-disable-next-line no-restricted-syntax
    out: (line) => void process.stdout.write(line + '\n'),
    // eslint-disable-next-line no-restricted-syntax
    err: (line) => void process.stderr.write(line + '\n'),
    stdin: process.stdin,
    interactive: process.stdin.isTTY && process.stderr.isTTY,
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
    stdin: io.stdin,
    interactive: io.interactive,
  };
}
