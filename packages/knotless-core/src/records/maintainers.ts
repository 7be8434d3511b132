// Who maintains a repository: the `maintainers` of its owner's ref table (format.md, "Teams"), read
// here once for every front end (the CLI's decisions and its list, the team's writes, the appview's
// index takes the same rule, `maintainerList`), so that they all agree on who counts.
import { KnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import type { Team } from './forge-authority.ts';
import { readRefTable, type TableRead } from './read-refs.ts';
import { maintainerList, type Maintainer } from './ref-table.ts';
import type { RemoteRepo } from './remote-repo.ts';

export { maintainerList, maintainersOf, type Maintainer } from './ref-table.ts';

/** The owner's table as read and the maintainers it names. */
export interface OwnerTable {
  table: TableRead;
  maintainers: Maintainer[];
}

/**
 * The one read of who maintains a repository: the owner's table, read with its proof
 * (records/read-refs.ts), and the maintainers it names; undefined when the repository has no table
 * (it keeps its refs in ref records, or there is none). A table that fails its rules or its proof
 * refuses the read, as it refuses every reader.
 */
export async function readMaintainers(remote: RemoteRepo): Promise<OwnerTable | undefined> {
  const read = await readRefTable(remote);
  return read === undefined
    ? undefined
    : { table: read, maintainers: maintainerList(read.table, remote.owner.did) };
}

/**
 * {@link readMaintainers} for a repository that must exist (the CLI's list and the changes of
 * maintainers): one that does not is refused in one sentence; one on ref records has no table.
 */
export async function readOwnerTable(remote: RemoteRepo): Promise<OwnerTable | undefined> {
  const read = await readMaintainers(remote);
  if (read !== undefined) return read;
  if (!(await remote.exists()))
    throw new KnotlessError('repo-missing', `${remote.label} does not exist; check the name.`);
  return undefined;
}

/**
 * The owner's table as a change of maintainers needs it: a repository still on ref records is
 * refused in one sentence, since maintainers are a field of the table.
 */
export async function ownerTable(remote: RemoteRepo): Promise<TableRead> {
  const read = await readOwnerTable(remote);
  if (read !== undefined) return read.table;
  throw new KnotlessError(
    'push-rejected',
    `${remote.label} keeps its refs in ref records, and only a repository on a ref table can have maintainers; run \`knotless repo migrate ${safeText(remote.name)}\` first, then add them.`,
  );
}

/**
 * The repository's team (its owner and its maintainers), as the authority rule takes it; a
 * repository without a table, or with none, has no maintainers.
 */
export async function readTeam(remote: RemoteRepo): Promise<Team> {
  const read = await readMaintainers(remote);
  return {
    owner: remote.owner.did,
    maintainers: read === undefined ? [] : read.maintainers.map((m) => m.did),
  };
}
