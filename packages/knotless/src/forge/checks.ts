// Checks and protection as the CLI reads them: from the PDSes directly (never the appview's index,
// which is only as current as the streams it follows), so only the accounts that can count are read: the owner's, the
// protecting maintainers', the runners their protections trust, the current account's and any the
// user names. The rules, and the reading, are
// knotless-core's (forge/checks.ts, forge/checks-store.ts); the CLI hands in its resolver and readers.
import type { Context } from '../context.ts';
import { commitVerdict as coreVerdict, type CommitVerdict } from 'knotless-core/forge/checks-store';
import { repoUri } from 'knotless-core/forge/records';
import type { Identity } from 'knotless-core/identity/resolver';
import { BlobCache } from 'knotless-core/cache/blob-cache';
import { Mirror } from 'knotless-core/cache/mirror';
import { syncRef } from 'knotless-core/forge/packs';
import { readRepoRefs } from 'knotless-core/records/read-refs';
import { runGit } from 'knotless-core/git/run';
import { PULLS } from './kinds.ts';
import { parseCheck, parseProtection } from './records.ts';
import { listItems, type Reader } from './subjects.ts';

export type { CommitVerdict };

/**
 * The checks of `commit` in the owner's repository `name`, as `branch`'s protection judges them:
 * the owner's and that of the maintainers the owner's ref table lists now (read once per command,
 * `r.team`); with no branch, a runner any protected branch trusts is marked trusted. `extra` are
 * accounts read beside those that can count, so that their checks are shown, named and untrusted:
 * their newest records only, as far as a listing shows, unless `othersWhole`.
 */
export async function commitVerdict(
  r: Reader,
  owner: Identity,
  name: string,
  commit: string,
  branch: string | undefined,
  extra: readonly Identity[],
  othersWhole = false,
): Promise<CommitVerdict> {
  const ctx = r.ctx;
  const readers = {
    resolve: (did: string) => ctx.resolver.resolve(did),
    check: parseCheck,
    protection: parseProtection,
    warn: (m: string) => r.note(`warning: ${m}`),
  };
  const team = await r.team(owner, repoUri(owner.did, name));
  return coreVerdict(r.store, readers, owner, name, commit, branch, extra, team.maintainers, othersWhole);
}

/** A runner as printed: its verified handle, else its DID. */
export async function runnerName(ctx: Context, did: string): Promise<string> {
  const id = await ctx.resolver.resolve(did);
  return id.handle ?? did;
}

/**
 * Whether `commit` belongs to the owner's repository `name`: a branch's or tag's commit, a commit in
 * their history (their packs, indexed into the cache's mirror), or a round's head of one of its pull
 * requests (a CI reports on a fork's commit before it is merged). Pull requests are found as `pr
 * list` finds them: through the appview when one is set, else only in the owner's and `me`'s accounts.
 */
export async function commitInRepository(
  r: Reader,
  owner: Identity,
  name: string,
  uri: string,
  commit: string,
  me: string | undefined,
): Promise<boolean> {
  const c = r.ctx;
  const remote = c.remoteRepo(owner, name, (m) => r.note(m));
  // Its refs whatever its layout (a ref table, or ref records), as every reader takes them.
  const refs = (await readRepoRefs(remote)).filter((ref) => ref.record.target !== undefined);
  if (refs.some((ref) => ref.record.target === commit || ref.record.peeled === commit)) return true;
  const pulls = await listItems(r, PULLS, owner, uri, 'all', me);
  if (pulls.some((p) => p.record.rounds.some((round) => round.head === commit))) return true;
  if (refs.length === 0) return false;
  const mirror = new Mirror(c.config.cacheDir, owner.did, name);
  const cache = new BlobCache(c.config.cacheDir);
  for (const ref of refs) await syncRef(mirror, remote, ref, cache, c.config.maxObjectBytes);
  const held = await runGit(['cat-file', '-e', `${commit}^{commit}`], {
    gitDir: mirror.gitDir,
    okCodes: [1, 128],
  });
  return held.code === 0;
}
