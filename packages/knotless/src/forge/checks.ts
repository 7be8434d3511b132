// Checks and protection as the CLI reads them: from the PDSes directly (the appview does not index
// checks), so only the accounts that can count are read: the owner's, the runners the protection
// trusts, the current account's and any the user names. The rules are knotless-core's forge/checks.ts.
import type { Context } from '../context.ts';
import {
  branchProtection,
  commitChecks,
  unmetChecks,
  type ShownCheck,
  type UnmetCheck,
} from 'knotless-core/forge/checks';
import { readChecks, readProtection } from 'knotless-core/forge/checks-store';
import type { ForgeStore } from 'knotless-core/forge/store';
import type { Identity } from 'knotless-core/identity/resolver';
import {
  parseCheck,
  parseProtection,
  repoUri,
  type BranchProtection,
  type ProtectionRecord,
} from './records.ts';

/** What a commit's checks come to for a branch (or for every protected branch when none is named). */
export interface CommitVerdict {
  protection: ProtectionRecord | undefined;
  branch: BranchProtection | undefined;
  shown: ShownCheck[];
  unmet: UnmetCheck[];
  /** Each shown runner's name: its verified handle, else its DID. */
  names: Map<string, string>;
}

/**
 * The checks of `commit` in the owner's repository `name`, as `branch`'s protection judges them
 * (with no branch, a runner any protected branch trusts is marked trusted). `extra` are accounts
 * read beside those that can count, so that their checks are shown, named and untrusted.
 */
export async function commitVerdict(
  ctx: Context,
  store: ForgeStore,
  owner: Identity,
  name: string,
  commit: string,
  branch: string | undefined,
  extra: readonly Identity[],
): Promise<CommitVerdict> {
  const { record: protection } = await readProtection(store, owner, name, parseProtection);
  const rules = branch === undefined ? undefined : branchProtection(protection, branch);
  const trusted =
    branch === undefined
      ? [...new Set((protection?.branches ?? []).flatMap((b) => b.trustedRunners))]
      : (rules?.trustedRunners ?? []);
  const runners = await Promise.all(trusted.map((did) => ctx.resolver.resolve(did)));
  const checks = await readChecks(store, [owner, ...runners, ...extra], parseCheck);
  const shown = commitChecks(checks, repoUri(owner.did, name), commit, trusted);
  const names = new Map<string, string>();
  for (const did of new Set(shown.map((c) => c.runner))) names.set(did, await runnerName(ctx, did));
  return { protection, branch: rules, shown, unmet: unmetChecks(rules, shown, names), names };
}

/** A runner as printed: its verified handle, else its DID. */
export async function runnerName(ctx: Context, did: string): Promise<string> {
  const id = await ctx.resolver.resolve(did);
  return id.handle ?? did;
}
