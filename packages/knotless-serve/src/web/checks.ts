// A commit's checks as the appview's merge judges them: read from the PDSes that can count (the
// owner's, the protecting maintainers' and the runners their protection trusts) by the core's reader
// and rule, exactly as `knotless pr merge` reads them, so the browser and the CLI never disagree
// about a merge.
import {
  branchRules,
  commitChecks,
  trustedRunners,
  unmetChecks,
  UNTRUSTED_COUNTED,
  UNTRUSTED_SHOWN,
} from 'knotless-core/forge/checks';
import { commitVerdict, requiredOf, type CommitVerdict } from 'knotless-core/forge/checks-store';
import { repoUri } from 'knotless-core/forge/records';
import { ForgeStore } from 'knotless-core/forge/store';
import { forgeRecords } from '../model/forge-records.ts';
import { HttpError, type RepoTarget, type Site } from './site.ts';

/**
 * `commit`'s checks in `repo` as `branch`'s protection judges them: the owner's and that of
 * `maintainers`, each record read from its writer's PDS. The caller reads `maintainers` from the
 * owner's table on the owner's PDS at the moment it decides, never from the index: a maintainer the
 * index has not heard of yet would otherwise have their requirements left out of a merge.
 */
export async function verdictOf(
  site: Site,
  repo: RepoTarget,
  commit: string,
  branch: string,
  maintainers: readonly string[],
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
  return commitVerdict(store, readers, owner, repo.name, commit, branch, [], maintainers);
}

/**
 * `commit`'s checks as the index has them, judged by knotless-core's rules: by `branch`'s
 * protection (the owner's and its maintainers', db/forge-store.ts `indexedProtection`), or with no
 * branch, with the runners any protected branch trusts marked trusted: the trusted runners'
 * verdicts all, the others' up to UNTRUSTED_SHOWN, and how many of theirs were left out (`left`).
 * What pages show; the merge itself reads the PDSes (verdictOf), at the moment it decides.
 */
export async function indexedVerdict(
  site: Site,
  repo: Pick<RepoTarget, 'did' | 'name'>,
  commit: string,
  branch: string | undefined,
): Promise<CommitVerdict> {
  const uri = repoUri(repo.did, repo.name);
  const protection = await site.index.forge.protection(repo.did, repo.name);
  const rules = branch === undefined ? [] : branchRules(protection, branch);
  const trusted = trustedRunners(protection, branch);
  const { rows, left } = await site.index.forge.checks(
    repo.did,
    repo.name,
    commit,
    [repo.did, ...trusted],
    UNTRUSTED_SHOWN,
    UNTRUSTED_COUNTED,
  );
  const shown = commitChecks(
    rows.map((r) => r.check),
    uri,
    commit,
    trusted,
  );
  const names = new Map(rows.map((r) => [r.check.runner, r.handle ?? r.check.runner]));
  // Whoever set a requirement is named in its reason: by the handle the index verified.
  for (const did of new Set(rules.map((r) => r.by)))
    if (!names.has(did)) names.set(did, (await site.index.owner(did))?.handle ?? did);
  return {
    protection,
    rules,
    required: requiredOf(rules),
    shown,
    unmet: unmetChecks(rules, shown, repo.did, names),
    names,
    cut: [],
    ...(left.count === 0 ? {} : { left }),
  };
}
