import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KnotlessError } from 'knotless-core/errors';
import { packageRoot } from '../../paths.ts';
import { stringOption, type Command } from '../command.ts';

/** The program that runs the dev network, as npm links it from the knotless-devnet package. */
const PROGRAM = 'knotless-dev';

/**
 * Where `knotless dev` finds its program, as git finds `git-<command>`: beside this knotless in the
 * workspace (run with this very Node, which the PDS needs to be the workspace's 22), else by name on
 * PATH. The CLI never loads the dev network (the PDS, PLC, the appview) into its own process.
 */
function devProgram(): { cmd: string; prefix: string[] } {
  const beside = path.join(packageRoot(), '..', 'knotless-devnet', 'bin', `${PROGRAM}.cjs`);
  if (fs.existsSync(beside)) return { cmd: process.execPath, prefix: [beside] };
  return { cmd: PROGRAM, prefix: [] };
}

/** Runs the dev network's program with these arguments; resolves with its exit status. */
function runDevProgram(args: string[]): Promise<number> {
  const { cmd, prefix } = devProgram();
  const child = spawn(cmd, [...prefix, ...args], { stdio: 'inherit' });
  // The network closes in order on SIGINT or SIGTERM: pass ours on, and stay until it has.
  const forward = (signal: NodeJS.Signals): void => void child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  return new Promise((resolve, reject) => {
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') return reject(err);
      reject(
        new KnotlessError(
          'dev-network',
          '`knotless dev` needs the knotless-devnet package (the local PLC and PDS), which is not installed here; run `npm install` and `npm start` in the knotless workspace.',
          { cause: err },
        ),
      );
    });
    // Killed by a signal: the shell's convention, 128 + its number.
    child.on('exit', (code, signal) =>
      resolve(code ?? 128 + (signal === null ? 0 : os.constants.signals[signal])),
    );
  });
}

export const command: Command = {
  name: 'dev',
  args: '[migrate <handle> | account <handle> <action> [new-handle]]',
  summary: 'run a local network (PLC, two PDSes and appview) to try knotless on',
  details: [
    'Creates the accounts alice.test (on the first PDS) and bob.test (on the second), logs alice in, writes DIR/env (source it in another shell) and prints "ready". Data stays in DIR for the next start; Ctrl-C stops the network.',
    '`knotless dev migrate <handle>` moves an account of the running network to its other PDS by the standard migration steps, printing each, and logs the shell in again when it was logged in as that account.',
    "`knotless dev account <handle> deactivate|activate|takedown|restore|delete|handle <new-handle>` changes an account as its user or its PDS's operator would, for trying what others then see.",
    'The network is the knotless-devnet package, part of the knotless workspace: this command runs its knotless-dev program.',
  ],
  options: {
    dir: {
      type: 'string',
      value: 'DIR',
      help: "keep the network here (default: $KNOTLESS_DEV_DIR, set by a network's env file, else ~/.local/share/knotless/dev)",
    },
  },
  positionals: { min: 0, max: 4 },
  async run({ args }) {
    const dir = stringOption(args, 'dir');
    const status = await runDevProgram([...args.positionals, ...(dir === undefined ? [] : ['--dir', dir])]);
    // The program has printed its own messages (its failures are knotless's sentences and codes).
    // A command's failures are KnotlessErrors, mapped in cli/main.ts; this one's status is the program's.
    if (status !== 0) process.exit(status);
  },
};
