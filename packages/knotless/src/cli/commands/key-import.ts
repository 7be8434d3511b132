import fs from 'node:fs';
import { KnotlessError } from 'knotless-core/errors';
import { importDeviceKey } from 'knotless-core/private/device';
import type { Command } from '../command.ts';
import type { Io } from '../io.ts';
import { readSecret } from '../prompt.ts';

/** A passphrase: KNOTLESS_KEY_PASSPHRASE, else asked for (or one line of standard input). */
export async function passphrase(given: string | undefined, io: Io, prompt: string): Promise<string> {
  const phrase = given ?? (await readSecret(io, prompt));
  if (phrase.length < 8)
    throw new KnotlessError('usage', 'The passphrase is shorter than 8 characters; use a longer one.');
  return phrase;
}

export const command: Command = {
  name: 'key import',
  args: '<file>',
  summary: 'make a key exported on another machine this machine’s key',
  details: [
    'Opens a file `knotless key export` wrote, with its passphrase. Refuses to replace a different key already here unless --replace.',
  ],
  options: { replace: { type: 'boolean', help: 'replace the key this machine has' } },
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const file = args.positionals[0]!;
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch {
      throw new KnotlessError(
        'usage',
        `${file} cannot be read; give the file \`knotless key export\` wrote.`,
      );
    }
    const key = await importDeviceKey(
      c.config.configDir,
      text,
      await passphrase(c.config.keyPassphrase, io, 'Passphrase of the key: '),
      args.values['replace'] === true,
    );
    io.err(`This machine's key is now ${key.fingerprint}.`);
  },
};
