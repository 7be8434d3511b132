import { KnotlessError } from 'knotless-core/errors';
import { GitError, gitText } from 'knotless-core/git/run';
import { installLfsSettings } from 'knotless-core/ops/lfs';
import { BIN_SCRIPTS } from '../../paths.ts';
import type { Command } from '../command.ts';

export const command: Command = {
  name: 'lfs install',
  args: '',
  summary: "move this repository's Git LFS objects through knotless (its remotes' owners' PDSes)",
  details: [
    "Sets this repository's git-lfs to use knotless as its standalone transfer agent, so that git lfs push, pull, fetch and fsck store and read LFS objects as blobs of the repository owner's PDS. git clone of a knotless:// URL sets it by itself; run this in a repository cloned before, or made with git init. git-lfs itself must be set up once (git lfs install).",
  ],
  positionals: { min: 0, max: 0 },
  examples: ['knotless lfs install && git lfs pull'],
  async run({ io }) {
    try {
      await gitText(['rev-parse', '--git-dir']);
    } catch (err) {
      if (!(err instanceof GitError)) throw err;
      throw new KnotlessError('usage', 'Run `knotless lfs install` inside a git repository.', { cause: err });
    }
    await installLfsSettings(BIN_SCRIPTS['knotless']!);
    io.err('git-lfs in this repository now moves LFS objects through knotless.');
  },
};
