/** Where a command writes: results to stdout, messages to stderr; stdin for prompts. */
export interface Io {
  out(line: string): void;
  err(line: string): void;
  stdin: NodeJS.ReadStream;
  interactive: boolean;
}

/** The process's own streams. */
export function processIo(): Io {
  return {
    out: (line) => void process.stdout.write(line + '\n'),
    err: (line) => void process.stderr.write(line + '\n'),
    stdin: process.stdin,
    interactive: process.stdin.isTTY && process.stderr.isTTY,
  };
}
