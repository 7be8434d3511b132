import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError } from 'knotless-core/errors';
import { PULLS } from '../../forge/kinds.ts';
import { checkRoundComplete, loadRoundPack } from 'knotless-core/forge/packs';
import { indexPack } from 'knotless-core/git/pack';
import { GitError, gitText, runGit } from 'knotless-core/git/run';
import { isValidRefName } from 'knotless-core/git/refname';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { itemFor, itemJson } from '../forge-shared.ts';

/** The git directory of the clone this runs in, or a sentence saying to run it in one. */
async function gitDirHere(): Promise<string> {
  try {
    return path.resolve((await gitText(['rev-parse', '--git-dir'])).trim());
  } catch (err) {
    if (!(err instanceof GitError)) throw err;
    throw new KnotlessError('usage', 'Run `knotless pr checkout` inside a clone of the repository.', {
      cause: err,
    });
  }
}

/** The longest record key kept whole in a branch name: a file system takes 255 bytes a name. */
const MAX_KEY_IN_BRANCH = 60;

/**
 * The local branch for a pull request: `pr/<rkey>`. A record key may hold what git refuses in a
 * branch name (`:`, `~`, `..`, a `.lock` ending: TIDs never do, hand-made keys can); those become
 * `-`, and the key's hash follows so that two keys cleaned alike (`a:1`, `a~1`) stay two branches.
 * A key longer than {@link MAX_KEY_IN_BRANCH} (up to 512 characters are valid) is cut to that
 * length, its hash following as well: a loose ref is a file, and git cannot write one whose name
 * is longer than the file system allows.
 */
export function localBranch(rkey: string): string {
  const plain = `pr/${rkey}`;
  if (rkey.length <= MAX_KEY_IN_BRANCH && isValidRefName(`refs/heads/${plain}`)) return plain;
  const cleaned = rkey
    .slice(0, MAX_KEY_IN_BRANCH)
    .replace(/[:~]|\.{2,}/g, '-')
    .replace(/^\./, '-')
    .replace(/\.lock$/, '-lock')
    .replace(/\.$/, '-');
  return `pr/${cleaned}-${createHash('sha256').update(rkey).digest('hex').slice(0, 8)}`;
}

export const command: Command = {
  name: 'pr checkout',
  args: '<[handle/]repo> <id>',
  summary: "in a clone: the pull request's last round as the local branch pr/<key>, checked out",
  details: [
    "The commits come from the round's pack in the author's account, so this works after the head branch was deleted. The base branch's history must be in the clone (git fetch first).",
  ],
  options: { json: JSON_OPTION },
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const gitDir = await gitDirHere();
    const c = ctx();
    const { item } = await itemFor(c, io, PULLS, args);
    const round = item.record.rounds.at(-1)!;
    const present = async (oid: string) =>
      (await runGit(['cat-file', '-e', `${oid}^{commit}`], { okCodes: [1, 128] })).code === 0;
    if (!(await present(round.base)))
      throw new KnotlessError(
        'usage',
        `This clone lacks ${round.base.slice(0, 12)}, the base the pull request was made on; run \`git fetch\` first.`,
      );
    const branch = localBranch(item.rkey);
    const ref = `refs/heads/${branch}`;
    const pack = await loadRoundPack(
      c,
      await c.resolver.resolve(item.did),
      round.pack,
      new BlobCache(c.config.cacheDir),
    );
    const { keepFile } = await indexPack(pack, gitDir, false);
    try {
      if (!(await present(round.head)))
        throw new KnotlessError(
          'corrupt-remote',
          `The round's pack does not hold its commit ${round.head}; nothing was checked out.`,
        );
      await checkRoundComplete(gitDir, round.head, ['--all'], 'this clone');
      const old = (await runGit(['rev-parse', '-q', '--verify', ref], { okCodes: [1] })).stdout
        .toString()
        .trim();
      if (old !== '' && old !== round.head) {
        const behind =
          (await runGit(['merge-base', '--is-ancestor', old, round.head], { okCodes: [1] })).code === 0;
        if (!behind)
          throw new KnotlessError(
            'usage',
            `${branch} has commits the pull request's last round lacks; rename or delete it first.`,
          );
      }
      const current = (await runGit(['symbolic-ref', '-q', 'HEAD'], { okCodes: [1] })).stdout
        .toString()
        .trim();
      // The branch checked out moves with its work tree (update-ref would leave the files behind).
      if (current === ref && old !== round.head)
        await runGit(['merge', '--ff-only', '-q', round.head]).catch((err: unknown) => {
          if (!(err instanceof GitError)) throw err;
          throw new KnotlessError(
            'usage',
            `${branch} could not move to ${round.head} (${safeText(err.stderr.trim().split('\n').pop() ?? '')}); commit or stash your changes first.`,
            { cause: err },
          );
        });
      else
        await runGit([
          'update-ref',
          '-m',
          `knotless pr checkout ${item.id}`,
          ref,
          round.head,
          ...(old === '' ? [''] : [old]),
        ]);
    } finally {
      // The pack is referenced now (or not wanted): git may repack it like any other.
      fs.rmSync(keepFile, { force: true });
    }
    await runGit(['checkout', '-q', branch]).catch((err: unknown) => {
      if (!(err instanceof GitError)) throw err;
      throw new KnotlessError(
        'usage',
        `${branch} is ${round.head} but could not be checked out (${safeText(err.stderr.trim().split('\n').pop() ?? '')}).`,
        { cause: err },
      );
    });
    io.err(`Switched to ${branch} (round ${item.record.rounds.length - 1} of ${safeText(item.id)}).`);
    if (args.values['json'] === true) io.out(safeJson({ ...itemJson(item), branch, head: round.head }));
    else io.out(branch);
  },
};
