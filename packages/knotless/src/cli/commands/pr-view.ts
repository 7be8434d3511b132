import { BlobCache } from 'knotless-core/cache/blob-cache';
import { Mirror } from 'knotless-core/cache/mirror';
import type { Context } from '../../context.ts';
import { isKnotlessError } from 'knotless-core/errors';
import { PULLS } from '../../forge/kinds.ts';
import { branchOf, loadRoundPack, scratchRepo, syncRef } from 'knotless-core/forge/packs';
import { checkRounds } from '../../forge/round-check.ts';
import { parseAtUri, type PullRecord } from '../../forge/records.ts';
import { REPO_COLLECTION } from 'knotless-core/records/collections';
import { commentsOn, type Item } from '../../forge/subjects.ts';
import { GitError, gitText } from 'knotless-core/git/run';
import { utcTime } from 'knotless-core/forge/short-id';
import { safeJson, safeText } from 'knotless-core/text/terminal';
import { JSON_OPTION, type Command } from '../command.ts';
import type { Io } from '../io.ts';
import {
  commentJson,
  currentDid,
  itemFor,
  itemJson,
  labelsText,
  printBody,
  printComments,
  type Target,
} from '../forge-shared.ts';

interface DiffSummary {
  files: number;
  insertions: number;
  deletions: number;
}

/**
 * The last round's diff summary: its pack on top of the target's base branch in a scratch
 * repository. Undefined, with the reason said, when it cannot be had (a reader is not stopped).
 */
async function diffSummary(
  c: Context,
  io: Io,
  target: Target,
  item: Item<PullRecord>,
): Promise<DiffSummary | undefined> {
  const round = item.record.rounds.at(-1)!;
  const cache = new BlobCache(c.config.cacheDir);
  try {
    const remote = c.remoteRepo(target.owner, target.name, (m) => io.err(`knotless: warning: ${m}`));
    const mirror = new Mirror(c.config.cacheDir, target.owner.did, target.name);
    await syncRef(mirror, remote, await branchOf(remote, item.record.base), cache, c.config.maxObjectBytes);
    const s = await scratchRepo(
      mirror,
      await loadRoundPack(c, await c.resolver.resolve(item.did), round.pack, cache),
    );
    try {
      const out = await gitText(['diff', '--shortstat', round.base, round.head], { gitDir: s.gitDir });
      const n = (word: string) => Number(new RegExp(`(\\d+) ${word}`).exec(out)?.[1] ?? 0);
      return { files: n('files? changed'), insertions: n('insertions?'), deletions: n('deletions?') };
    } finally {
      s.close();
    }
  } catch (err) {
    if (!isKnotlessError(err) && !(err instanceof GitError)) throw err;
    io.err(`knotless: the diff's summary is not available (${safeText(err.message)})`);
    return undefined;
  }
}

/** A repository's at-uri as people write it: handle/name (the DID when its handle is not verified). */
async function repoLabel(c: Context, uri: string): Promise<string> {
  const u = parseAtUri(uri);
  if (u === undefined || u.collection !== REPO_COLLECTION) return safeText(uri);
  const who = await c.resolver.resolve(u.did);
  return `${safeText(who.handle ?? u.did)}/${safeText(u.rkey)}`;
}

export const command: Command = {
  name: 'pr view',
  args: '<[handle/]repo> <id>',
  summary: 'show a pull request: state, rounds, comments and the diff summary',
  options: { json: JSON_OPTION },
  positionals: { min: 2, max: 2 },
  async run({ ctx, io, args }) {
    const c = ctx();
    const { target, item, r } = await itemFor(c, io, PULLS, args);
    const pull = item.record;
    const me = await currentDid(c);
    const comments = await commentsOn(
      r,
      PULLS,
      item.uri,
      [target.owner.did, item.did, ...(me === undefined ? [] : [me])],
      me,
    );
    const diff = await diffSummary(c, io, target, item);
    const checked = await checkRounds(c, (m) => io.err(`knotless: warning: ${m}`), pull);
    if (args.values['json'] === true) {
      io.out(
        safeJson({
          ...itemJson(item),
          body: pull.body,
          base: pull.base,
          head: pull.head,
          rounds: pull.rounds.map((x, i) => ({
            head: x.head,
            base: x.base,
            pack: { cid: x.pack.ref.$link, size: x.pack.size },
            createdAt: x.createdAt,
            ...(checked.onBranch === undefined ? {} : { onBranch: checked.onBranch[i] }),
          })),
          checkedAgainst: {
            repo: checked.repo,
            branch: checked.branch,
            ...(checked.tip === undefined ? {} : { commit: checked.tip }),
            ...(checked.reason === undefined ? {} : { reason: checked.reason }),
          },
          comments: comments.map(commentJson),
          ...(diff === undefined ? {} : { diff }),
        }),
      );
      return;
    }
    io.out(`${safeText(pull.title, 300)}`);
    io.out(`  id       ${safeText(item.id)}`);
    io.out(`  state    ${item.state}${item.merged === undefined ? '' : ` (${item.merged})`}`);
    for (const why of item.ignoredChecks ?? [])
      io.out(`  merged   ignoring a required check: ${safeText(why, 300)}`);
    io.out(`  author   ${safeText(item.handle ?? item.did)}`);
    io.out(`  opened   ${utcTime(item.record.createdAt) ?? safeText(item.record.createdAt, 40)}`);
    io.out(`  into     ${target.label} ${safeText(pull.base)}`);
    io.out(`  from     ${await repoLabel(c, pull.head.repo)} ${safeText(pull.head.branch)}`);
    io.out(
      checked.tip === undefined
        ? `  checked  not against ${checked.repo} ${checked.branch} (${checked.reason ?? 'unknown'})`
        : `  checked  against ${checked.repo} ${checked.branch} at ${checked.tip.slice(0, 12)}`,
    );
    if (item.labels.length > 0) io.out(`  labels   ${labelsText(item.labels)}`);
    if (diff !== undefined)
      io.out(
        `  diff     ${diff.files} file${diff.files === 1 ? '' : 's'} changed, +${diff.insertions} -${diff.deletions}`,
      );
    printBody(io, pull.body);
    io.out(`rounds (${pull.rounds.length})`);
    for (const [i, x] of pull.rounds.entries())
      io.out(
        `  ${i}  ${x.head}  on ${x.base.slice(0, 12)}  ${utcTime(x.createdAt) ?? safeText(x.createdAt, 40)}${checked.onBranch?.[i] === false ? `  NOT on ${checked.repo} ${checked.branch}` : ''}`,
      );
    printComments(io, comments);
  },
};
