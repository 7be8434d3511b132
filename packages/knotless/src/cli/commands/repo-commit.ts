import fs from 'node:fs';
import { BlobCache } from '../../cache/blob-cache.ts';
import { KnotlessError } from '../../errors.ts';
import { commitToBranch, type Change } from '../../repo/commit.ts';
import { stringOption, type Command } from '../command.ts';
import { ownRepo } from './owner.ts';

function list(value: string | boolean | string[] | undefined): string[] {
  return Array.isArray(value) ? value : [];
}

export const command: Command = {
  usage:
    'repo commit <[handle/]name> -m MSG [--branch B] [--add PATH=FILE]... [--delete PATH]... [--author "N <E>"]',
  summary: 'commit files to a branch without a clone',
  options: {
    message: { type: 'string', short: 'm' },
    branch: { type: 'string', short: 'b' },
    add: { type: 'string', multiple: true },
    delete: { type: 'string', multiple: true },
    author: { type: 'string' },
  },
  positionals: { min: 1, max: 1 },
  async run({ ctx, io, args }) {
    const message = stringOption(args, 'message');
    if (message === undefined || message.trim() === '')
      throw new KnotlessError('usage', 'A commit needs a message: pass -m MSG.');
    const changes: Change[] = [
      ...list(args.values['add']).map((spec): Change => {
        const eq = spec.indexOf('=');
        if (eq <= 0)
          throw new KnotlessError(
            'usage',
            `--add ${spec}: write --add PATH=FILE (the path in the repository, then the local file).`,
          );
        const file = spec.slice(eq + 1);
        if (!fs.statSync(file, { throwIfNoEntry: false })?.isFile()) {
          throw new KnotlessError('usage', `--add ${spec}: ${file} is not a file here.`);
        }
        return { kind: 'add', path: spec.slice(0, eq), file };
      }),
      ...list(args.values['delete']).map((p): Change => ({ kind: 'delete', path: p })),
    ];
    if (changes.length === 0)
      throw new KnotlessError('usage', 'Nothing to commit: pass --add PATH=FILE or --delete PATH.');
    const c = ctx();
    const { auth, remote } = await ownRepo(c, args.positionals[0]!, 'commit to', io);
    const branch = stringOption(args, 'branch');
    const author = stringOption(args, 'author');
    const commit = await commitToBranch(
      remote,
      { auth, cache: new BlobCache(c.config.cacheDir), cacheDir: c.config.cacheDir },
      {
        message,
        changes,
        ...(branch === undefined ? {} : { branch }),
        ...(author === undefined ? {} : { author }),
      },
    );
    io.out(commit);
  },
};
