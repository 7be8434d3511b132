// Who maintains a repository (format.md, "Teams"): the owner's table lists maintainers, and adding or
// removing one is one write of that table, swapped on the CID it was read at. Removal also settles
// the refs: the owner's entries take the repository's values as they were computed just before,
// each naming every writer in `over`, so that nothing the removed maintainer pushed is lost while
// anything they write later counts for nothing (their table is no longer read).
import fs from 'node:fs';
import type { BlobCache } from '../cache/blob-cache.ts';
import { KnotlessError } from '../errors.ts';
import { downloadBlob, uploadBlob } from '../packs/transfer.ts';
import { maintainersOf, ownerTable, readOwnerTable } from '../records/maintainers.ts';
import {
  readMemberTable,
  readTeamRefs,
  teamTable,
  type MemberTable,
  type TableRead,
  type TeamRead,
} from '../records/read-refs.ts';
import type { PackEntry } from '../records/ref-rules.ts';
import { compareRefNames, type Over, type RefTable, type TableRef } from '../records/ref-table.ts';
import type { RemoteRepo } from '../records/remote-repo.ts';
import { SwapConflict } from '../records/ref-writes.ts';
import { writeRefTable } from '../records/table-write.ts';
import { teamRefs } from '../records/team-refs.ts';
import { safeText } from '../text/terminal.ts';
import { parsePrivate, readRepoRecord } from '../private/repo-keys.ts';
import { migrateToTable, type Migrated } from './table-migrate.ts';
import type { Authorizer, XrpcClient } from '../xrpc/client.ts';

/** Attempts when the owner's table keeps moving under the write (pushes landing meanwhile). */
const ATTEMPTS = 5;

/** Writes the owner's table again with `change` applied to the table as read, until it lands. */
async function rewrite<T>(
  remote: RemoteRepo,
  auth: Authorizer,
  change: (read: TableRead) => Promise<{ next: RefTable; result: T } | { done: T }>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const read = await ownerTable(remote);
    const step = await change(read);
    if ('done' in step) return step.done;
    try {
      await writeRefTable(remote, auth, step.next, read);
      return step.result;
    } catch (err) {
      if (!(err instanceof SwapConflict)) throw err;
      if (attempt >= ATTEMPTS)
        throw new KnotlessError(
          'remote-changed',
          `The ref table of ${remote.label} kept changing while its maintainers were being changed; try again.`,
        );
    }
  }
}

/** The table as read, one seq later, written now. */
function next(read: TableRead, changes: Partial<RefTable>): RefTable {
  return { ...read.table, ...changes, seq: read.table.seq + 1, updatedAt: new Date().toISOString() };
}

/** True when `did` is a member of the private repository `remote` (its record wraps the ring to them). */
export async function isMember(remote: RemoteRepo, did: string): Promise<boolean> {
  const info = parsePrivate((await readRepoRecord(remote.reader, remote.owner, remote.name)).value);
  return info?.members.some((m) => m.did === did) === true;
}

/**
 * Names `did` a maintainer (one write of the owner's table); false when they were one already. A
 * repository still on ref records is moved onto its table first (`moved` is told what the migration
 * did), since the list is a field of the table. A maintainer of a private repository must be one of
 * its members (the key ring wrapped to their devices: `repo share`), since they seal what they push
 * with it; anyone else is refused before anything is written.
 */
export async function addMaintainer(
  remote: RemoteRepo,
  auth: Authorizer,
  did: string,
  moved?: (m: Migrated) => void,
): Promise<boolean> {
  if (did === remote.owner.did)
    throw new KnotlessError('usage', `You own ${remote.label}; only another account can be its maintainer.`);
  // readOwnerTable refuses a repository that does not exist; undefined is one on ref records.
  const found = await readOwnerTable(remote);
  await remote.prepare();
  if (remote.isPrivate && !(await isMember(remote, did)))
    throw new KnotlessError(
      'usage',
      `${remote.label} is private, and ${safeText(did)} is not one of its members, so they could not read what they push; share it with them first (\`knotless repo share ${remote.name} <handle>\`), then add them. Nothing was changed.`,
    );
  if (found === undefined) moved?.(await migrateToTable(remote, auth));
  return rewrite(remote, auth, (read) => {
    if (maintainersOf(read.table, remote.owner.did).includes(did)) return Promise.resolve({ done: false });
    const since = new Date().toISOString();
    return Promise.resolve({
      next: next(read, { maintainers: [...read.table.maintainers, { did, since }] }),
      result: true,
    });
  });
}

/** What a removal did: whether the account was a maintainer, and the refs it kept of theirs. */
export interface Removed {
  removed: boolean;
  /** Refs whose value the owner's table now holds from the removed maintainer's table. */
  kept: string[];
  /** Set when the removed maintainer's table could not be read (their values only they held are not kept). */
  unread?: string;
}

/**
 * Removes `did` from the maintainers: one write of the owner's table that drops them and sets the
 * owner's entries to the repository's values as computed just before, each naming every writer in
 * `over` (their packs copied into the owner's account, since the removed maintainer's are no longer
 * read). Then the removed maintainer's table is read once more: a value they wrote before the
 * removal landed that held against everyone's (so it may have been acknowledged) is kept with a
 * second write.
 */
export async function removeMaintainer(
  remote: RemoteRepo,
  auth: Authorizer,
  did: string,
  cache: BlobCache,
): Promise<Removed> {
  let before: TeamRead | undefined;
  const first = await rewrite<Removed>(remote, auth, async (read) => {
    if (!maintainersOf(read.table, remote.owner.did).includes(did))
      return { done: { removed: false, kept: [] } };
    const team = await readTeamRefs(remote, read);
    before = team;
    const refs = await settle(remote, auth, team, cache, team.refs);
    const maintainers = read.table.maintainers.filter((m) => m.did !== did);
    const gone = team.members.find((m) => m.did === did)?.read === undefined;
    const unread = team.unread.find((u) => u.did === did)?.why;
    return {
      next: next(read, { maintainers, refs: maintainers.length === 0 ? plain(refs) : refs }),
      result: {
        removed: true,
        kept: refs.filter((r) => valueOwner(team, r.ref) === did && !gone).map((r) => r.ref),
        ...(unread === undefined ? {} : { unread }),
      },
    };
  });
  if (!first.removed || before === undefined) return first;
  // A push of theirs that landed between the read above and the removal saw itself listed.
  let again: MemberTable;
  try {
    again = await readMemberTable(remote, did);
  } catch (err) {
    if (!(err instanceof KnotlessError)) throw err;
    return { ...first, unread: err.message.replace(/\.$/, '') };
  }
  const was = before;
  const late = teamRefs(remote.owner.did, [
    teamTable(remote.owner.did, was.owner.table),
    ...was.members.map((m) =>
      m.did === did ? teamTable(did, again.read?.table) : teamTable(m.did, m.read?.table),
    ),
  ]);
  const absorbed = [...late].filter(
    ([ref, v]) => v.by === did && v.divergent === undefined && was.refs.get(ref)?.target !== v.target,
  );
  if (absorbed.length === 0) return first;
  const team: TeamRead = {
    ...was,
    members: was.members.map((m) => (m.did === did ? again : m)),
    refs: new Map(absorbed),
  };
  const kept = await rewrite<string[]>(remote, auth, async (read) => {
    const taken = await settle(remote, auth, team, cache, team.refs);
    const byName = new Map(read.table.refs.map((r) => [r.ref, r]));
    for (const r of taken) byName.set(r.ref, r);
    const refs = [...byName.values()].sort((a, b) => compareRefNames(a.ref, b.ref));
    const named = read.table.maintainers.length > 0;
    return { next: next(read, { refs: named ? refs : plain(refs) }), result: taken.map((r) => r.ref) };
  });
  return { ...first, kept: [...new Set([...first.kept, ...kept])].sort(compareRefNames) };
}

/** Whose entry a ref's computed value is. */
function valueOwner(team: TeamRead, ref: string): string | undefined {
  return team.refs.get(ref)?.by;
}

/** A table without maintainers holds no tombstones and names no one in `over`. */
function plain(refs: TableRef[]): TableRef[] {
  return refs.filter((r) => r.deleted !== true).map(({ over: _over, ...r }) => r);
}

/**
 * The owner's entries for `values` (computed refs): each the value of the writer whose entry counts,
 * with `over` naming every other writer's current value, so that it supersedes them all. A value
 * from a maintainer's table brings its packs into the owner's account (the same bytes, so the same
 * blob CIDs).
 */
async function settle(
  remote: RemoteRepo,
  auth: Authorizer,
  team: TeamRead,
  cache: BlobCache,
  values: TeamRead['refs'],
): Promise<TableRef[]> {
  const tables = new Map<string, RefTable | undefined>([[remote.owner.did, team.owner.table]]);
  const holders = new Map<string, MemberTable>();
  for (const m of team.members) {
    tables.set(m.did, m.read?.table);
    holders.set(m.did, m);
  }
  const out: TableRef[] = [];
  for (const [ref, value] of values) {
    const over: Over[] = [...tables]
      .filter(([w]) => w !== remote.owner.did)
      .map(([w, t]) => {
        const target = t?.refs.find((r) => r.ref === ref)?.target;
        return target === undefined ? { did: w } : { did: w, target };
      });
    const entry = tables.get(value.by)?.refs.find((r) => r.ref === ref);
    if (value.target === undefined || entry === undefined || entry.target === undefined) {
      out.push({ ref, packs: [], deleted: true, over });
      continue;
    }
    const holder = holders.get(value.by);
    const packs =
      holder === undefined
        ? entry.packs
        : await copyPacks(
            remote,
            auth,
            entry.packs.map((p) => ({ ...p, holder: { did: holder.did, reader: holder.remote.reader } })),
            cache,
            { did: remote.owner.did, reader: remote.reader },
            tableBlobs(team.owner.table),
          );
    out.push({
      ref,
      target: entry.target,
      ...(entry.peeled === undefined ? {} : { peeled: entry.peeled }),
      packs,
      ...(over.length === 0 ? {} : { over }),
    });
  }
  return out.sort((a, b) => compareRefNames(a.ref, b.ref));
}

/**
 * The packs `packs` as the account of `to` may list them: a record may name only blobs its own
 * account holds, so the blobs of a pack held elsewhere (another writer's, by its `holder`; else the
 * owner's, `owner`) are downloaded and uploaded to `to`'s account first. The same bytes give the
 * same blob CIDs, so the entries stay as they were; blobs in `have` (the account lists them already)
 * are not sent again.
 */
export async function copyPacks(
  to: RemoteRepo,
  auth: Authorizer,
  packs: PackEntry[],
  cache: BlobCache,
  owner: { did: string; reader: XrpcClient },
  have: ReadonlySet<string> = new Set(),
): Promise<PackEntry[]> {
  const writer = to.writer(auth);
  const out: PackEntry[] = [];
  for (const p of packs) {
    const { holder, ...pack } = p;
    const from = holder ?? owner;
    if (from.did !== to.owner.did)
      for (const part of p.parts ?? []) {
        const cid = part.ref.$link;
        if (have.has(cid)) continue;
        const what = `pack ${p.id}`;
        const got =
          cache.open(cid) ?? (await downloadBlob(from.reader, from.did, what, cid, part.size, cache));
        let bytes: Buffer;
        try {
          bytes = Buffer.alloc(got.size);
          fs.readSync(got.fd, bytes, 0, got.size, 0);
        } finally {
          fs.closeSync(got.fd);
        }
        const blob = await uploadBlob(
          writer,
          {
            length: bytes.length,
            open: async function* () {
              yield await Promise.resolve(bytes);
            },
          },
          `copying ${what} into the account of ${safeText(to.owner.handle ?? to.owner.did)}`,
        );
        if (blob.ref.$link !== cid)
          throw new KnotlessError(
            'pds-error',
            `The PDS of ${safeText(to.owner.handle ?? to.owner.did)} stored a blob of ${what} under another CID; nothing was written.`,
          );
      }
    out.push(pack);
  }
  return out;
}

/** Every blob CID a table's entries list: blobs its account holds already. */
export function tableBlobs(table: RefTable | undefined): Set<string> {
  return new Set(
    (table?.refs ?? []).flatMap((r) => r.packs.flatMap((p) => (p.parts ?? []).map((b) => b.ref.$link))),
  );
}
