// A commit's checks as the appview's merge judges them: read from the PDSes that can count (the
// owner's and the runners the branch's protection trusts) by the core's reader and rule, exactly as
// `knotless pr merge` reads them, so the browser and the CLI never disagree about a merge.
import { commitVerdict, type CommitVerdict } from 'knotless-core/forge/checks-store';
import { ForgeStore } from 'knotless-core/forge/store';
import { forgeRecords } from '../ingest/forge-records.ts';
import { HttpError, type RepoTarget, type Site } from './site.ts';

/** `commit`'s checks in `repo` as `branch`'s protection judges them. */
export async function verdictOf(
  site: Site,
  repo: RepoTarget,
  commit: string,
  branch: string,
): Promise<CommitVerdict> {
  const resolve = async (did: string) => {
    const o = await site.identities.owner(did);
    if (o.pds === null)
      throw new HttpError(502, `The checks cannot be read: ${did} has no PDS the appview can reach.`);
    return { did: o.did, pds: o.pds, ...(o.handle === null ? {} : { handle: o.handle }) };
  };
  const owner = await resolve(repo.did);
  const store = new ForgeStore(site.forge, (m) => site.log(m));
  const readers = { resolve, check: forgeRecords.check, protection: forgeRecords.protection };
  return commitVerdict(store, readers, owner, repo.name, commit, branch, []);
}
