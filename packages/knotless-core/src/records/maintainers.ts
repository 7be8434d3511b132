// Who maintains a repository: the `maintainers` of its owner's ref table (format.md, "Teams"), read
// here once for every front end (the CLI's decisions, the helper, the appview's index), so that
// they all agree on who counts.
import type { Team } from './forge-authority.ts';
import { readRefTable } from './read-refs.ts';
import { maintainersOf } from './ref-table.ts';
import type { RemoteRepo } from './remote-repo.ts';

export { maintainersOf } from './ref-table.ts';

/**
 * The maintainers of `remote`'s repository, from its owner's table read with its proof
 * (records/read-refs.ts); a repository without a table has none. A table that fails its rules or
 * its proof refuses the read, as it refuses every reader.
 */
export async function readMaintainers(remote: RemoteRepo): Promise<string[]> {
  const read = await readRefTable(remote);
  return read === undefined ? [] : maintainersOf(read.table, remote.owner.did);
}

/** The repository's team (its owner and its maintainers), as the authority rule takes it. */
export async function readTeam(remote: RemoteRepo): Promise<Team> {
  return { owner: remote.owner.did, maintainers: await readMaintainers(remote) };
}
