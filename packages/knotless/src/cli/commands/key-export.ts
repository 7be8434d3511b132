import fs from 'node:fs';
import { KnotlessError } from 'knotless-core/errors';
import { exportDeviceKey, loadDeviceKey } from 'knotless-core/private/device';
import type { Command } from '../command.ts';
import { passphrase } from './key-import.ts';

export const command: Command = {
  name: 'key export',
  args: '<file>',
  summary: "write this machine's key to a file, encrypted with a passphrase",
  details: [
    'The file is an age file (scrypt), armored; bring it to another machine and run `knotless key import <file>` there. The passphrase is asked for on the terminal (or read as one line of standard input, or from KNOTLESS_KEY_PASSPHRASE).',
  ],
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const key = await loadDeviceKey(c.config.configDir);
    if (key === undefined)
      throw new KnotlessError('not-found', 'This machine has no key yet; `knotless key list` makes one.');
    const phrase = await passphrase(c.config.keyPassphrase, io, 'Passphrase for the exported key: ');
    const file = args.positionals[0]!;
    fs.writeFileSync(file, await exportDeviceKey(key, phrase), { mode: 0o600, flag: 'wx' });
    io.err(`Wrote key ${key.fingerprint} to ${file}.`);
  },
};
