import { activeSession } from '../auth/login.ts';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { KnotlessError, isKnotlessError } from 'knotless-core/errors';
import { pushedFrom } from 'knotless-core/git/objects';
import { GitError } from 'knotless-core/git/run';
import { pushRefs, type PushOutcome, type PushSpec } from 'knotless-core/ops/push/push';
import type { RemoteRepo } from 'knotless-core/records/remote-repo';
import { printErr, safeText } from 'knotless-core/text/terminal';
import { branchRules, pushRefusal, type RepoProtection } from 'knotless-core/forge/checks';
import { readRepoProtection } from 'knotless-core/forge/checks-store';
import { readMaintainers } from 'knotless-core/records/maintainers';
import { lastTableRead } from 'knotless-core/records/read-refs';
import { maintainersOf } from 'knotless-core/records/ref-table';
import { ForgeStore } from 'knotless-core/forge/store';
import type { ProtectionCheck } from 'knotless-core/ops/push/check';
import { parseProtection } from '../forge/records.ts';
import type { HelperState } from './state.ts';

function parsePushLine(line: string): PushSpec {
  let spec = line.slice('push '.length);
  const force = spec.startsWith('+');
  if (force) spec = spec.slice(1);
  const colon = spec.lastIndexOf(':');
  return { src: spec.slice(0, colon), dst: spec.slice(colon + 1), force };
}

/** A push's answer for git, and the refs whose pack lists now want a compaction of their own. */
export interface PushResult {
  lines: string[];
  compact: string[];
}

/**
 * Answers a batch of `push` lines with one `ok <dst>` or `error <dst> <why>` per ref: the push
 * operation (ops/push/push.ts) does the work, handed what this helper knows (its session, the refs
 * git was shown, git's options); a failure of the whole push is one sentence and each ref's reason.
 */
export async function pushBatch(state: HelperState, lines: string[]): Promise<PushResult> {
  const specs = lines.map(parsePushLine);
  const outcomes = await push(state, specs).catch((err: unknown) => {
    if (err instanceof GitError) {
      err = new KnotlessError(
        'push-rejected',
        `git failed while preparing the push: ${err.stderr.trim().split('\n').pop() ?? ''}; run \`git fsck\` to check this repository.`,
        { cause: err, reason: 'git failed' },
      );
    }
    if (!isKnotlessError(err)) throw err;
    printErr(`knotless: ${err.message}`);
    const reason = err.reason;
    return specs.map((s): PushOutcome => ({ dst: s.dst, error: reason }));
  });
  return {
    // git prints the reason as it is, and a line break would end the answer: escaped, always.
    lines: outcomes.map((o) =>
      o.error === undefined ? `ok ${o.dst}` : `error ${o.dst} ${safeText(o.error)}`,
    ),
    compact: outcomes.filter((o) => o.compact === true && o.error === undefined).map((o) => o.dst),
  };
}

async function push(state: HelperState, specs: PushSpec[]): Promise<PushOutcome[]> {
  const remote = await state.remote();
  const auth = await activeSession(state.ctx);
  const { config } = state.ctx;
  const dirs = await pushedFrom();
  const pushed = await pushRefs(
    {
      remote,
      auth,
      pusher: auth.session,
      ...dirs,
      cache: new BlobCache(config.cacheDir),
      cacheDir: config.cacheDir,
      fold: config.autoCompact,
      split: config.packSplit,
      migrate: config.refTable,
      chatter: state.options,
      options: state.options,
      listing: async () => {
        // git lists before it pushes: normally the refs it decided on are the ones it was shown.
        if (state.refs !== undefined)
          return { refs: state.refs, contested: state.contested, shownToGit: true };
        const refs = await state.list(true);
        return { refs, contested: state.contested, shownToGit: false };
      },
      remember: (written) => state.remember(written),
      protection: protectionOf(state, remote),
    },
    specs,
  );
  printCompareLinks(state, remote, pushed.created, pushed.head);
  return pushed.outcomes;
}

/**
 * The branch protection of `remote`'s team, read once, on the first update that would rewrite or
 * delete a branch (a plain push reads nothing more): the owner's record and those of the
 * maintainers the owner's table listed for this push (the listing's read of it, else one read
 * now), each from its writer's own account. The rule is the core's (forge/checks.ts): any one
 * record that refuses the update refuses it, and the sentence names whose.
 */
function protectionOf(state: HelperState, remote: RemoteRepo): ProtectionCheck {
  const warn = (m: string) => printErr(`knotless: warning: ${m}`);
  let read: Promise<RepoProtection> | undefined;
  const team = async (): Promise<string[]> => {
    if (remote.layout === 'records') return [];
    const table = lastTableRead(remote)?.table ?? (await readMaintainers(remote))?.table.table;
    return table === undefined ? [] : maintainersOf(table, remote.owner.did);
  };
  const resolve = (did: string) => state.ctx.resolver.resolve(did);
  return async (branch, update) => {
    read ??= team().then((maintainers) =>
      readRepoProtection(
        new ForgeStore(state.ctx, warn),
        remote.owner,
        remote.name,
        parseProtection,
        maintainers,
        resolve,
        warn,
      ),
    );
    const refused = pushRefusal(branchRules(await read, branch), update);
    if (refused === undefined) return undefined;
    const who = await Promise.all(
      refused.by.map(async (did) =>
        did === remote.owner.did
          ? "the repository's owner"
          : `${safeText((await resolve(did)).handle ?? did)} (a maintainer)`,
      ),
    );
    return { reason: refused.reason, who };
  };
}

/**
 * After new branches land, prints where to compare them and open a pull request, as GitHub does.
 * Computed locally: the appview learns of the push from the network, not from us.
 */
function printCompareLinks(
  state: HelperState,
  remote: RemoteRepo,
  created: string[],
  head: string | undefined,
): void {
  const appview = state.ctx.config.appview;
  if (appview === undefined || state.options.verbosity < 1 || head === undefined) return;
  const base = head.replace(/^refs\/heads\//, '');
  for (const ref of created) {
    if (!ref.startsWith('refs/heads/') || ref === head) continue;
    const branch = ref.replace(/^refs\/heads\//, '');
    const owner = encodeURIComponent(remote.owner.handle ?? remote.owner.did);
    const path = (name: string) => name.split('/').map(encodeURIComponent).join('/');
    const link = `${appview}/${owner}/${encodeURIComponent(remote.name)}/compare/${path(base)}...${path(branch)}`;
    printErr(
      'knotless:',
      `knotless: Create a pull request for '${safeText(branch)}' by visiting:`,
      `knotless:      ${link}`,
      'knotless:',
    );
  }
}
