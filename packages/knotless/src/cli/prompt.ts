import readline from 'node:readline';
import { KnotlessError } from 'knotless-core/errors';
import { safeLine } from 'knotless-core/text/terminal';
import type { Io } from './io.ts';

/** Reads one line from a non-terminal stdin (a pipe or file), e.g. a password piped in by a script. */
async function readLine(stdin: NodeJS.ReadStream): Promise<string> {
  const rl = readline.createInterface({ input: stdin, terminal: false });
  try {
    for await (const line of rl) return line;
    return '';
  } finally {
    rl.close();
  }
}

/** Reads a secret without echoing it: from the terminal when there is one, else one line of stdin. */
export async function readSecret(io: Io, prompt: string): Promise<string> {
  if (!io.stdin.isTTY) return readLine(io.stdin);
  // eslint-disable-next-line no-restricted-syntax -- a prompt ends without a line break
  process.stderr.write(safeLine(prompt));
  const stdin = io.stdin;
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding('utf8');
  try {
    return await new Promise<string>((resolve, reject) => {
      let value = '';
      const onData = (chunk: string): void => {
        for (const ch of chunk) {
          if (ch === '\r' || ch === '\n' || ch === '\u0004') {
            stdin.off('data', onData);
            resolve(value);
            return;
          }
          if (ch === '\u0003') {
            stdin.off('data', onData);
            reject(new KnotlessError('cancelled', 'Cancelled.'));
            return;
          }
          if (ch === '\u007f' || ch === '\b') value = value.slice(0, -1);
          else value += ch;
        }
      };
      stdin.on('data', onData);
    });
  } finally {
    stdin.setRawMode(false);
    stdin.pause();
    // eslint-disable-next-line no-restricted-syntax -- ends the prompt's line
    process.stderr.write('\n');
  }
}

/** Asks a yes/no question on the terminal; "no" unless the answer starts with y. */
export async function confirm(io: Io, question: string): Promise<boolean> {
  const rl = readline.createInterface({ input: io.stdin, output: process.stderr });
  try {
    const answer = await new Promise<string>((resolve) =>
      rl.question(`${safeLine(question)} [y/N] `, resolve),
    );
    return /^y/i.test(answer.trim());
  } finally {
    rl.close();
  }
}
