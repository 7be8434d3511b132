// Checks and protection as the CLI reads them: from the PDSes directly (never the appview's index,
// which is only as current as the streams it follows), so only the accounts that can count are read: the owner's, the runners the protection
// trusts, the current account's and any the user names. The rules, and the reading, are
// knotless-core's (forge/checks.ts, forge/checks-store.ts); the CLI hands in its resolver and readers.
import type { Context } from '../context.ts';
import { commitVerdict as coreVerdict, type CommitVerdict } from 'knotless-core/forge/checks-store';
import type { ForgeStore } from 'knotless-core/forge/store';
import type { Identity } from 'knotless-core/identity/resolver';
import { parseCheck, parseProtection } from './records.ts';

export type { CommitVerdict };

/**
 * The checks of `commit` in the owner's repository `name`, as `branch`'s protection judges them
 * (with no branch, a runner any protected branch trusts is marked trusted). `extra` are accounts
 * read beside those that can count, so that their checks are shown, named and untrusted.
 */
export function commitVerdict(
  ctx: Context,
  store: ForgeStore,
  owner: Identity,
  name: string,
  commit: string,
  branch: string | undefined,
  extra: readonly Identity[],
): Promise<CommitVerdict> {
  const readers = {
    resolve: (did: string) => ctx.resolver.resolve(did),
    check: parseCheck,
    protection: parseProtection,
  };
  return coreVerdict(store, readers, owner, name, commit, branch, extra);
}

/** A runner as printed: its verified handle, else its DID. */
export async function runnerName(ctx: Context, did: string): Promise<string> {
  const id = await ctx.resolver.resolve(did);
  return id.handle ?? did;
}
