import fs from 'node:fs';
import path from 'node:path';
import { BlobCache } from '../cache/blob-cache.ts';
import { Mirror } from '../cache/mirror.ts';
import type { ForgeServices } from './services.ts';
import { KnotlessError } from '../errors.ts';
import { GitError, gitText, runGit } from '../git/run.ts';
import type { Identity } from '../identity/resolver.ts';
import { lastTableRead } from '../records/read-refs.ts';
import { unionPacks, type PackEntry, type RefRecord } from '../records/ref-record.ts';
import { applyRefUpdates, maintainersOf } from '../records/ref-table.ts';
import { rewriteTable } from '../records/table-write.ts';
import { SwapConflict, type RemoteRef, type RemoteRepo } from '../records/remote-repo.ts';
import { buildRangePacks } from '../packs/range-packs.ts';
import { storePacks } from '../packs/store-packs.ts';
import { safeText } from '../text/terminal.ts';
import type { Authorizer } from '../xrpc/client.ts';
import { readRepoRefs } from '../records/read-refs.ts';
import { hasTeam, pushBranch } from '../ops/push/branch.ts';
import { branchIn, checkRoundComplete, loadRoundPack, scratchRepo, syncRef, type Scratch } from './packs.ts';
import type { PullRecord } from './records.ts';

export type MergeMethod = 'merge' | 'squash' | 'rebase';

export interface MergeRequest {
  target: RemoteRepo;
  auth: Authorizer;
  /**
   * The account merging: the owner, or a maintainer the owner's table names, whose merge goes into
   * their own table (format.md, "Teams").
   */
  pusher: { did: string; handle: string };
  author: Identity;
  pull: PullRecord;
  /** `<did>/<rkey>`, for the merge commit's message. */
  id: string;
  method: MergeMethod;
  /**
   * The base branch's tip the merge was decided against (a page rendered from it): when the branch
   * is elsewhere, nothing is written (`remote-changed`).
   */
  expectBase?: string;
}

/** What a merge did: the base branch's commit before and after, and whether it fast-forwarded. */
export interface MergeResult {
  before: string;
  after: string;
  fastForward: boolean;
  /** The base already held the round's head: nothing was pushed. */
  alreadyIn: boolean;
}

function conflict(req: MergeRequest, cause: unknown): KnotlessError {
  return new KnotlessError(
    'merge-conflict',
    `The pull request conflicts with ${safeText(req.pull.base)} of ${req.target.label}; nothing was written: the author can rebase and run \`knotless pr update\`.`,
    { cause },
  );
}

/** The new tip of the base branch, made in `s` by `method` (all plumbing but rebase's cherry-pick). */
async function combine(
  s: Scratch,
  req: MergeRequest,
  base: string,
  head: string,
): Promise<{ tip: string; ff: boolean }> {
  const git = (args: string[], okCodes?: number[]) =>
    runGit(args, { gitDir: s.gitDir, env: { GIT_WORK_TREE: s.workTree }, ...(okCodes ? { okCodes } : {}) });
  const ff = (await git(['merge-base', '--is-ancestor', base, head], [1])).code === 0;
  const title = `${req.pull.title}${req.pull.body === undefined ? '' : `\n\n${req.pull.body}`}`;
  if (ff && req.method !== 'squash') return { tip: head, ff: true };
  if (req.method === 'rebase') {
    const merges = (await git(['rev-list', '--merges', `${base}..${head}`])).stdout.toString().trim();
    if (merges !== '')
      throw new KnotlessError(
        'usage',
        'The pull request holds merge commits, which --rebase cannot replay; use --merge or --squash.',
      );
    await git(['checkout', '-q', '--detach', base]);
    try {
      await git(['-c', 'core.hooksPath=/dev/null', 'cherry-pick', '--allow-empty', `${base}..${head}`]);
    } catch (err) {
      if (err instanceof GitError && fs.existsSync(path.join(s.gitDir, 'CHERRY_PICK_HEAD')))
        throw conflict(req, err);
      throw err;
    }
    return { tip: (await gitText(['rev-parse', 'HEAD'], { gitDir: s.gitDir })).trim(), ff: false };
  }
  // merge-tree --write-tree (git ≥ 2.38) merges without a work tree: exit 1 is a conflict.
  const merged = await git(['merge-tree', '--write-tree', '--no-messages', base, head], [1]);
  if (merged.code === 1) throw conflict(req, new Error(merged.stdout.toString()));
  const tree = merged.stdout.toString().split('\n')[0]!.trim();
  const message =
    req.method === 'squash' ? title : `Merge pull request ${req.id} from ${req.pull.head.branch}\n\n${title}`;
  const parents = req.method === 'squash' ? ['-p', base] : ['-p', base, '-p', head];
  const tip = (await gitText(['commit-tree', tree, ...parents], { gitDir: s.gitDir, input: message })).trim();
  return { tip, ff: false };
}

/**
 * Merges a pull request's last round into its base branch: the base branch's packs into the cache's
 * mirror, the round's pack (from the author's PDS, so a deleted head branch does not matter) into a
 * scratch repository on top, the merge there, and then the same write as any push: one new pack
 * after the branch's list, and a compare-and-swap putRecord on the branch's record, or of the
 * repository's ref table when it has one (another ref moved meanwhile is kept: the table is read again
 * and the merge written over it). When the branch moved meanwhile, or the merge conflicts, nothing is
 * written.
 */
export async function mergePull(ctx: ForgeServices, req: MergeRequest): Promise<MergeResult> {
  const round = req.pull.rounds[req.pull.rounds.length - 1]!;
  const cache = new BlobCache(ctx.config.cacheDir);
  const refs = await readRepoRefs(req.target);
  const baseRef = branchIn(req.target, refs, req.pull.base);
  const team = hasTeam(req.target);
  if (!team && req.pusher.did !== req.target.owner.did)
    throw new KnotlessError(
      'permission-denied',
      `Only ${safeText(req.target.owner.handle ?? req.target.owner.did)} can merge into ${req.target.label}; you are ${safeText(req.pusher.handle)}.`,
    );
  const before = baseRef.record.target!;
  if (req.expectBase !== undefined && before !== req.expectBase)
    throw new KnotlessError(
      'remote-changed',
      `${safeText(req.pull.base)} of ${req.target.label} moved since ${req.expectBase.slice(0, 12)}; nothing was written.`,
    );
  const mirror = new Mirror(ctx.config.cacheDir, req.target.owner.did, req.target.name);
  await syncRef(mirror, req.target, baseRef, cache, ctx.config.maxObjectBytes);
  const pack = await loadRoundPack(ctx, req.author, round.pack, cache);
  const s = await scratchRepo(mirror, pack);
  try {
    const missing = await runGit(['cat-file', '-e', `${round.head}^{commit}`], {
      gitDir: s.gitDir,
      okCodes: [128, 1],
    });
    if (missing.code !== 0)
      throw new KnotlessError(
        'corrupt-remote',
        `The round's pack and ${safeText(req.pull.base)} of ${req.target.label} do not hold the round's commit ${round.head}; the author can run \`knotless pr update\`.`,
      );
    await checkRoundComplete(
      s.gitDir,
      round.head,
      [before],
      `${safeText(req.pull.base)} of ${req.target.label}`,
    );
    const contained =
      (await runGit(['merge-base', '--is-ancestor', round.head, before], { gitDir: s.gitDir, okCodes: [1] }))
        .code === 0;
    if (contained) return { before, after: before, fastForward: true, alreadyIn: true };
    const { tip, ff } = await combine(s, req, before, round.head).catch((err: unknown) => {
      // A conflict is a KnotlessError already; git failing otherwise (no committer identity…) is said.
      if (!(err instanceof GitError)) throw err;
      throw new KnotlessError(
        'push-rejected',
        `git could not merge (${safeText(err.stderr.trim().split('\n').pop() ?? '')}); nothing was written.`,
        { cause: err },
      );
    });
    if (team) {
      await mergeAsTeam(ctx, req, s, refs, tip, cache);
      return { before, after: tip, fastForward: ff, alreadyIn: false };
    }
    // The structure and the blobs apart, as a push writes them (format.md, "Structure apart from
    // blobs"): a merge brings in every blob of the pull request, which a partial clone skips.
    const made = await buildRangePacks({
      tips: [tip],
      exclude: [before],
      progress: false,
      gitDir: s.gitDir,
      tmpDir: path.join(ctx.config.cacheDir, 'tmp'),
      split: ctx.config.packSplit ?? true,
      list: false,
    });
    const packs = await storePacks([...baseRef.record.packs, ...made.map((m) => m.entry)], 1, {
      writer: req.target.writer(req.auth),
      cache,
      cacheDir: ctx.config.cacheDir,
      chatter: { verbosity: 0, progress: false },
    });
    const moved = () =>
      new KnotlessError(
        'remote-changed',
        `${safeText(req.pull.base)} of ${req.target.label} moved while merging; nothing was written: run \`knotless pr merge\` again.`,
      );
    const table = lastTableRead(req.target);
    if (table !== undefined) {
      await writeMergeToTable(req, table, before, baseRef.record.packs, packs, tip, moved);
      return { before, after: tip, fastForward: ff, alreadyIn: false };
    }
    const record: RefRecord = { ...baseRef.record, target: tip, packs, updatedAt: new Date().toISOString() };
    try {
      await req.target.putRef(req.auth, baseRef.key, record, baseRef.cid);
    } catch (err) {
      if (err instanceof SwapConflict)
        throw new KnotlessError(
          'remote-changed',
          `${safeText(req.pull.base)} of ${req.target.label} moved while merging; nothing was written: run \`knotless pr merge\` again.`,
          { cause: err },
        );
      throw err;
    }
    return { before, after: tip, fastForward: ff, alreadyIn: false };
  } finally {
    s.close();
  }
}

/**
 * The merged tip written by a writer of a team (the owner or a maintainer): a push of the base
 * branch from the scratch repository (push/branch.ts), judged against the listing the merge was
 * made on. Another writer's value the merge does not contain is `remote-changed`, and nothing of
 * the merge is left standing.
 */
async function mergeAsTeam(
  ctx: ForgeServices,
  req: MergeRequest,
  s: Scratch,
  refs: RemoteRef[],
  tip: string,
  cache: BlobCache,
): Promise<void> {
  const pushed = await pushBranch({
    remote: req.target,
    auth: req.auth,
    pusher: req.pusher,
    gitDir: s.gitDir,
    cache,
    cacheDir: ctx.config.cacheDir,
    split: ctx.config.packSplit ?? true,
    refs,
    ref: `refs/heads/${req.pull.base}`,
    tip,
  });
  if (pushed.kind === 'written') return;
  if (pushed.reason === 'fetch first')
    throw new KnotlessError(
      'remote-changed',
      `${safeText(req.pull.base)} of ${req.target.label} moved while merging; nothing was written: run \`knotless pr merge\` again.`,
    );
  throw new KnotlessError(
    'push-rejected',
    `${safeText(req.pull.base)} of ${req.target.label} was not written (${pushed.reason}); nothing was merged, try again.`,
  );
}

/**
 * The merged tip written into the target's ref table: one write, swapped on the table read. When the
 * table moved meanwhile it is read again: a base branch still at `before` takes the merge (on the
 * packs it has now, when a compaction rewrote them, with the merge's new ones after), one elsewhere
 * is `remote-changed` and nothing is written.
 */
async function writeMergeToTable(
  req: MergeRequest,
  first: NonNullable<ReturnType<typeof lastTableRead>>,
  before: string,
  read: PackEntry[],
  packs: PackEntry[],
  tip: string,
  moved: () => KnotlessError,
): Promise<void> {
  const ref = `refs/heads/${req.pull.base}`;
  const old = new Set(read.map((p) => p.id));
  const added = packs.filter((p) => !old.has(p.id));
  const res = await rewriteTable(req.target, req.auth, first, (t) => {
    const now = t.table.refs.find((r) => r.ref === ref);
    if (now?.target !== before) throw moved();
    // The owner named maintainers meanwhile: the merge is a team's write now, which the next run
    // makes (judged against every writer's value); written here it would replace none of theirs.
    if (maintainersOf(t.table, req.target.owner.did).length > 0) throw moved();
    const same = now.packs.length === read.length && now.packs.every((p, i) => p.id === read[i]!.id);
    const list = same ? packs : unionPacks([now.packs, added]);
    const next = applyRefUpdates(
      t.table,
      [{ ref, target: tip, packs: list }],
      { repo: t.table.repo, maintainer: false },
      new Date(),
    );
    return Promise.resolve({ kind: 'write', table: next });
  });
  if (res.kind === 'busy') throw moved();
}
