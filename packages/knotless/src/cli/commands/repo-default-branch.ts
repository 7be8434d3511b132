import { KnotlessError } from 'knotless-core/errors';
import { moveHead } from 'knotless-core/ops/head';
import { parseRepoSpec } from 'knotless-core/records/name';
import { readRepoRefs } from 'knotless-core/records/read-refs';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import { ownRepo, ownerOf } from './owner.ts';

export const command: Command = {
  name: 'repo default-branch',
  args: '<[handle/]name> [<branch>]',
  summary: 'show or set the branch HEAD names (what clones check out)',
  options: { json: JSON_OPTION },
  examples: ['knotless repo default-branch site', 'knotless repo default-branch site trunk'],
  positionals: { min: 1, max: 2 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const specText = args.positionals[0]!;
    const wanted = args.positionals[1];
    const json = args.values['json'] === true;
    if (wanted === undefined) {
      const spec = parseRepoSpec(specText);
      const owner = await ownerOf(c, spec.owner);
      const remote = c.remoteRepo(owner, spec.name, (m) => io.err(`knotless: warning: ${m}`));
      // The one reader of refs: the table's `head` when the repository has one, else its HEAD record
      // (a private repository's under the key only its members can name).
      const refs = await readRepoRefs(remote);
      if (refs.length === 0 && !(await remote.exists())) {
        throw new KnotlessError('repo-missing', `${remote.label} does not exist; check the name.`);
      }
      const branch = refs.find((r) => r.record.ref === 'HEAD')?.record.symref;
      if (json) io.out(safeJson({ repo: remote.label, branch: branch ?? null }));
      else if (branch === undefined)
        io.err(`${remote.label} has no default branch yet (its first push sets it).`);
      else io.out(safeText(branch.replace(/^refs\/heads\//, '')));
      return;
    }
    const branch = wanted.startsWith('refs/') ? wanted : `refs/heads/${wanted}`;
    if (!branch.startsWith('refs/heads/')) {
      throw new KnotlessError(
        'usage',
        `The default branch must be a branch (refs/heads/…), not ${safeText(wanted)}.`,
      );
    }
    const { auth, remote } = await ownRepo(c, specText, 'change the default branch of', io);
    const res = await moveHead(remote, auth, branch);
    if (res.kind === 'missing') {
      throw new KnotlessError(
        'not-found',
        `${remote.label} has no branch ${safeText(wanted)}; push it first (git push origin ${safeText(wanted)}).`,
      );
    }
    if (res.kind === 'busy') {
      throw new KnotlessError(
        'remote-changed',
        `HEAD of ${remote.label} kept changing while it was being set; try again.`,
      );
    }
    const short = branch.replace(/^refs\/heads\//, '');
    if (json) io.out(safeJson({ repo: remote.label, branch: short, changed: res.move.changed }));
    else
      io.err(
        res.move.changed
          ? `${remote.label}: HEAD now names ${safeText(short)}.`
          : `${remote.label}: HEAD already names ${safeText(short)}.`,
      );
  },
};
