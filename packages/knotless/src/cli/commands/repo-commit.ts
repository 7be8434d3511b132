import fs from 'node:fs';
import { BIN_SCRIPTS } from '../../paths.ts';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { commitToBranch, type Change } from 'knotless-core/ops/commit';
import { compactionDue } from 'knotless-core/packs/geometric';
import { compactLater } from '../../compact-later.ts';
import { stringOption, type Command } from '../command.ts';
import { namedRepo } from './owner.ts';

function list(value: string | boolean | string[] | undefined): string[] {
  return Array.isArray(value) ? value : [];
}

export const command: Command = {
  name: 'repo commit',
  args: '<[handle/]name>',
  summary:
    'commit files to a branch of your repository, or one you maintain, without a clone; prints the commit id',
  details: [
    "The branch defaults to the repository's HEAD branch; a new branch starts from it. Author and committer come from git config and GIT_AUTHOR_*/GIT_COMMITTER_*.",
    "A maintainer commits to the owner's repository by naming it (alice.example/site): the commit is pushed into the maintainer's own account, as their git push would be.",
  ],
  options: {
    message: { type: 'string', short: 'm', value: 'MSG', help: 'the commit message (required)' },
    branch: { type: 'string', short: 'b', value: 'B', help: 'the branch to commit to' },
    add: { type: 'string', multiple: true, value: 'PATH=FILE', help: 'put the local FILE at PATH' },
    delete: { type: 'string', multiple: true, value: 'PATH', help: 'remove PATH' },
    author: { type: 'string', value: '"N <E>"', help: 'the author, instead of git config' },
  },
  examples: ['knotless repo commit hello -m "from a bot" --add notes.txt=./notes.txt'],
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
    // The owner's repository, or one the owner's table names this account a maintainer of: the
    // commit then goes into the maintainer's own table, and anyone else is refused before a write.
    const { auth, remote } = await namedRepo(c, args.positionals[0]!, io);
    const { session } = auth;
    const branch = stringOption(args, 'branch');
    const author = stringOption(args, 'author');
    const { commit, ref, packs } = await commitToBranch(
      remote,
      {
        auth,
        cache: new BlobCache(c.config.cacheDir),
        cacheDir: c.config.cacheDir,
        fold: c.config.autoCompact,
        pusher: { did: session.did, handle: session.handle },
        split: c.config.packSplit,
        // The agent's view is current where this machine's file may not be: pushes through the
        // agent leave the file as it was.
        // A view of ref records comes with the commit it is complete at: the write carries it as
        // `swapCommit` (RemoteRepo.viewProof), so that its landing proves the view, and that no ref
        // table was created before it (no read of the table after the write, format.md "Old repositories").
        known: async () => {
          const view = await c.agent?.view(remote.owner.did, remote.name, remote.owner.pds);
          if (view?.uploads !== undefined) c.uploadBudgets.keep(view.uploads.service, view.uploads.status);
          if (view?.commit !== undefined) remote.viewProof = { commit: view.commit, state: 'pending' };
          return view?.refs;
        },
      },
      {
        message,
        changes,
        ...(branch === undefined ? {} : { branch }),
        ...(author === undefined ? {} : { author }),
      },
    );
    io.out(commit);
    // A bot's next commit then travels on the agent's open connection (agent/autostart.ts). Started
    // once this one is made: the agent's own start would share the machine's cores with it.
    await c.startAgent({ bin: BIN_SCRIPTS['knotless']!, warn: (m) => io.err(`warning: ${m}`) });
    // The commit folded small packs into its own write; a list still far past logarithmic (big
    // commits pile up as blob packs) gets a compaction of its own, as after a push.
    if (compactionDue(packs)) await compactLater(c.config, remote.owner.did, remote.name, [ref]);
  },
};
