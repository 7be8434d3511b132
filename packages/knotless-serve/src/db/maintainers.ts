// The maintainers the index holds for each repository (migration 0012): the last list the owner's
// ref table gave whole (ref-tables.ts keeps it), read by the authority rule (forge-state.ts) and the
// pages.
import type { Kysely, Transaction } from 'kysely';
import type { Maintainer } from 'knotless-core/records/maintainers';
import type { Database } from './schema.ts';

type Db = Kysely<Database> | Transaction<Database>;

/** A maintainer as the index keeps them: as the owner's table lists them (knotless-core's shape). */
export type { Maintainer };

/** A maintainer as pages name them: with the handle the index verified, when it knows one. */
export interface NamedMaintainer extends Maintainer {
  handle: string | null;
}

/** The maintainers the index holds for `did`'s repository `repo`, in the owner's order. */
export async function maintainersOfRepo(db: Db, did: string, repo: string): Promise<Maintainer[]> {
  return db
    .selectFrom('repo_maintainers')
    .select(['maintainer as did', 'since'])
    .where('did', '=', did)
    .where('repo', '=', repo)
    .orderBy('position')
    .execute();
}

/** {@link maintainersOfRepo} with each one's handle, for pages. */
export async function namedMaintainers(db: Db, did: string, repo: string): Promise<NamedMaintainer[]> {
  return db
    .selectFrom('repo_maintainers')
    .leftJoin('owners', 'owners.did', 'repo_maintainers.maintainer')
    .select(['repo_maintainers.maintainer as did', 'repo_maintainers.since', 'owners.handle'])
    .where('repo_maintainers.did', '=', did)
    .where('repo_maintainers.repo', '=', repo)
    .orderBy('repo_maintainers.position')
    .execute();
}

/** Every maintainer of every repository of `did`, by repository name (an organisation's page). */
export async function maintainersOfAccount(db: Db, did: string): Promise<Map<string, NamedMaintainer[]>> {
  const rows = await db
    .selectFrom('repo_maintainers')
    .leftJoin('owners', 'owners.did', 'repo_maintainers.maintainer')
    .select([
      'repo_maintainers.repo',
      'repo_maintainers.maintainer as did',
      'repo_maintainers.since',
      'owners.handle',
    ])
    .where('repo_maintainers.did', '=', did)
    .orderBy('repo_maintainers.repo')
    .orderBy('repo_maintainers.position')
    .execute();
  const out = new Map<string, NamedMaintainer[]>();
  for (const r of rows)
    out.set(r.repo, [...(out.get(r.repo) ?? []), { did: r.did, since: r.since, handle: r.handle }]);
  return out;
}

/** The repositories of other accounts that `did` maintains, with their owners' handles. */
export async function maintainedBy(
  db: Db,
  did: string,
): Promise<{ did: string; handle: string | null; repo: string }[]> {
  return db
    .selectFrom('repo_maintainers')
    .innerJoin('repos', (j) =>
      j.onRef('repos.did', '=', 'repo_maintainers.did').onRef('repos.name', '=', 'repo_maintainers.repo'),
    )
    .leftJoin('owners', 'owners.did', 'repo_maintainers.did')
    .select(['repo_maintainers.did', 'owners.handle', 'repo_maintainers.repo'])
    .where('repo_maintainers.maintainer', '=', did)
    .where('repos.deleted', '=', 0)
    .where('owners.status', 'is', null)
    .orderBy('repo_maintainers.did')
    .orderBy('repo_maintainers.repo')
    .execute();
}
