import readline from 'node:readline';
import { KnotlessError } from 'knotless-core/errors';
import { writeStderr } from 'knotless-core/text/fd-io';
import { safeLine } from 'knotless-core/text/terminal';
import type { Io } from './io.ts';

/**
 * Reads a secret without echoing it: from the terminal when there is one, else one line of stdin
 * (read as it is: no stream on a pipe we inherited).
 */
export async function readSecret(io: Io, prompt: string): Promise<string> {
  const stdin = io.terminal();
  if (stdin === undefined) return io.readLine();
  writeStderr(safeLine(prompt));
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
    // Ends the prompt's line.
    writeStderr('\n');
  }
}

/** Asks a yes/no question on the terminal; "no" unless the answer starts with y. */
export async function confirm(io: Io, question: string): Promise<boolean> {
  writeStderr(`${safeLine(question)} [y/N] `);
  const stdin = io.terminal();
  let answer: string;
  if (stdin === undefined) answer = await io.readLine();
  else {
    const rl = readline.createInterface({ input: stdin, terminal: false });
    try {
      answer = await new Promise<string>((resolve) => rl.once('line', resolve));
    } finally {
      rl.close();
    }
  }
  return /^y/i.test(answer.trim());
}
