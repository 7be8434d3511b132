// Moving a repository from one `dev.knotless.ref` record per ref to its owner's ref table
// (format.md, "Old repositories"). The records are listed after reading the account's commit, and
// the table is created with `swapCommit` on that commit: it lands only when nothing in the account
// was written since, so no ref record written meanwhile is left out of it; a moved commit means a
// read again, a bounded number of times. Then the old records are deleted, 199 a commit. A process
// killed between the two leaves a table and some records: readers already read the table and ignore
// the records (with a warning), and the next migration (or a push that migrates) finds the table
// and deletes what is left. Killed before the table's write, it changed nothing a reader sees (a
// part no table lists is never read).
import { crashPoint } from '../crash.ts';
import { KnotlessError } from '../errors.ts';
import { REF_COLLECTION, REPO_COLLECTION, refKeyPrefix } from '../records/collections.ts';
import { listKeyRange } from '../records/list-range.ts';
import { rkeyOf } from '../records/list-records.ts';
import { readProvedRecords, readRefTable, useTableRead, type TableRead } from '../records/read-refs.ts';
import { applyRefUpdates, refTableKey, type RefTable, type RefUpdate } from '../records/ref-table.ts';
import { SwapConflict, writeFailure } from '../records/ref-writes.ts';
import { contestedSentence, refsByName, type RemoteRef } from '../records/remote-ref.ts';
import type { RemoteRepo } from '../records/remote-repo.ts';
import { isSealed } from '../records/sealer.ts';
import { putTableRecord, tableLayout, writeTableParts } from '../records/table-write.ts';
import { XrpcError, generalFailure, type Authorizer } from '../xrpc/client.ts';

/** Reads and writes of the table before giving up: each one lost to a write elsewhere in the account. */
export const MIGRATE_ATTEMPTS = 5;
/** Deletes per commit: the PDS's limit of 200 writes in one applyWrites, less one to spare. */
const DELETES_PER_COMMIT = 199;
/** Rounds of listing and deleting leftover records (records written while deleting are listed again). */
const DELETE_ROUNDS = 5;

/** The rate-limit points a PDS charges per write (the reference PDS and bsky.social alike). */
export const POINTS = { create: 3, update: 2, delete: 1, put: 2 } as const;

/** What a migration did, for the command to print and a push to report. */
export interface Migrated {
  /** The refs the table holds (HEAD apart). */
  refs: number;
  /** The default branch the table names. */
  head: string | undefined;
  /** True when this run wrote the table; false when one was there (an earlier run left records). */
  created: boolean;
  /** Part records written (a table past 256 KiB keeps its refs in parts). */
  parts: number;
  /** Old ref records deleted. */
  deleted: number;
  /** Write requests sent (`putRecord` of the table and parts, one `applyWrites` per batch of deletes). */
  requests: number;
  /** The rate-limit points those writes cost (putRecord 2, each delete 1), refused attempts included. */
  points: number;
}

/**
 * Moves `remote` (a repository the caller owns, written as `auth`) onto its ref table and deletes
 * its ref records. Idempotent: a repository with a table only has its leftover records deleted. A
 * private repository's table is sealed, as its records were (records/table-write.ts `tableLayout`).
 */
export async function migrateToTable(remote: RemoteRepo, auth: Authorizer): Promise<Migrated> {
  const spent = { requests: 0, points: 0 };
  const done = { created: false, parts: 0 };
  let table: RefTable | undefined = (await readRefTable(remote))?.table;
  if (table === undefined) {
    if (!(await remote.exists()))
      throw new KnotlessError(
        'repo-missing',
        `${remote.label} does not exist; check the name (\`knotless repo list\` lists yours).`,
      );
    table = await createTable(remote, auth, spent, done);
  }
  const deleted = await deleteRecords(remote, auth, spent);
  return {
    refs: table.refs.length,
    head: table.head,
    created: done.created,
    parts: done.parts,
    deleted,
    requests: spent.requests,
    points: spent.points,
  };
}

/**
 * Starts a repository this process has just created on its empty table. `created` is the account's
 * commit the repository record's own write made: the records are listed once and, when there are none,
 * the table is created with `swapCommit` on that commit, so it lands only when nothing in the
 * account was written since (no ref record can have appeared after that listing). With the record's
 * write that is three requests, against a whole migration's seven. Anything else (no commit known,
 * records left by an earlier repository of that name, a write in between) is a whole migration.
 */
export async function startTable(
  remote: RemoteRepo,
  auth: Authorizer,
  created: string | undefined,
): Promise<Migrated> {
  if (created === undefined) return migrateToTable(remote, auth);
  // One plain listing, not the proved one a migration reads: the table is written with
  // `swapCommit` on the commit this process's own creation made, so it lands only if the account
  // is as this process left it, and a PDS that hid a record here could as well have dropped the write.
  if ((await remote.listRefs()).length > 0) return migrateToTable(remote, auth);
  const did = remote.owner.did;
  const key = refTableKey(remote.name, did, did);
  const next = tableOf([], `at://${did}/${REPO_COLLECTION}/${remote.name}`);
  const writes = await tableLayout(remote, next, key);
  try {
    await putTableRecord(remote, auth, key, writes.table, {
      swapRecord: null,
      swapCommit: created,
    });
  } catch (err) {
    if (!(err instanceof SwapConflict)) throw err;
    return migrateToTable(remote, auth);
  }
  return { refs: 0, head: undefined, created: true, parts: 0, deleted: 0, requests: 1, points: POINTS.put };
}

/**
 * The owner's table of `remote` when one was created while this process wrote ref records, read once
 * every such write has answered (and then the layout this process writes); undefined when there is
 * none. A migration creates the table with `swapCommit` on the commit it listed the records at, so a
 * table this read does not find is created, if ever, from a listing that holds those writes; one it
 * finds may have missed them, and the writer must put its values into the table before it reports
 * them written. One request; none for a
 * context that reads ref records alone, and none after a single write that carried the warm agent's
 * `swapCommit` and landed (`proven`): the agent keeps no view of ref records once a table exists, so
 * that write landed on a commit with no table, and a table created later lists it.
 */
export async function tableSinceWrite(remote: RemoteRepo, writes: number): Promise<TableRead | undefined> {
  if (remote.verifier === undefined) return undefined;
  if (writes === 1 && remote.viewProof?.state === 'proven') return undefined;
  const read = await readRefTable(remote);
  if (read !== undefined) useTableRead(remote, read);
  return read;
}

/**
 * The one line a command that moves a repository onto its table before its own write prints on
 * stderr (a push, `repo maintainer add`); undefined when the table was there and no record was left.
 */
export function movedSentence(label: string, moved: Migrated): string | undefined {
  if (!moved.created && moved.deleted === 0) return undefined;
  return `knotless: moved the ${moved.refs} ref(s) of ${label} into its ref table first (${moved.deleted} old ref record(s) deleted, ${moved.points} point(s)).`;
}

/**
 * Writes the table from the records as they are at one commit of the account: read the commit, list
 * the records, write (parts first, then, for a table with parts, the commit and the records read once
 * more, since the parts' own writes moved the commit), then the table with `swapCommit` on the
 * commit the records were read at and `swapRecord: null` (no table was there). A refused swap reads
 * everything again; another migration that won the race is taken as done.
 */
async function createTable(
  remote: RemoteRepo,
  auth: Authorizer,
  spent: { requests: number; points: number },
  done: { created: boolean; parts: number },
): Promise<RefTable> {
  const did = remote.owner.did;
  const key = refTableKey(remote.name, did, did);
  const repoUri = `at://${did}/${REPO_COLLECTION}/${remote.name}`;
  for (let attempt = 0; attempt < MIGRATE_ATTEMPTS; attempt++) {
    const old = await listOldRefs(remote);
    const listed = old.refs;
    let commit = old.commit;
    const next = tableOf(listed, repoUri);
    const writes = await tableLayout(remote, next, key);
    if (writes.create.length > 0) {
      spent.requests += writes.create.length;
      spent.points += POINTS.put * writes.create.length;
      await writeTableParts(remote, auth, writes.create);
      done.parts += writes.create.length;
      const again = await listOldRefs(remote);
      commit = again.commit;
      if (!sameListing(listed, again.refs)) continue;
    }
    crashPoint('migrate:before-table-write');
    spent.requests++;
    spent.points += POINTS.put;
    try {
      await putTableRecord(remote, auth, key, writes.table, {
        swapRecord: null,
        swapCommit: commit,
      });
      crashPoint('migrate:table-written');
      done.created = true;
      return next;
    } catch (err) {
      if (!(err instanceof SwapConflict)) throw err;
      // Another migration (or a push by a version that migrates) may have written the table.
      const now = await readRefTable(remote);
      if (now !== undefined) return now.table;
    }
  }
  throw new KnotlessError(
    'remote-changed',
    `The account of ${remote.label} kept changing while its refs were being moved into a ref table (${MIGRATE_ATTEMPTS} tries); nothing was changed, try again.`,
  );
}

/**
 * The repository's ref records, every one valid and claiming its ref alone (anything else refuses),
 * proved whole at the commit returned: the table is written swapped on it, so it holds exactly them.
 */
async function listOldRefs(remote: RemoteRepo): Promise<{ refs: RemoteRef[]; commit: string }> {
  const { refs: listed, commit } = await readProvedRecords(remote);
  const { contested } = refsByName(listed);
  for (const [name, claims] of contested)
    throw new KnotlessError(
      'corrupt-remote',
      `${contestedSentence(name, claims)}; delete it (git push origin :${name}) or push it again, then migrate again. Nothing was changed.`,
    );
  return { refs: listed, commit };
}

/** The table holding exactly the listed refs, HEAD as its default branch. */
function tableOf(listed: RemoteRef[], repoUri: string) {
  const updates: RefUpdate[] = [];
  let head: string | undefined;
  for (const { record } of listed) {
    if (record.ref === 'HEAD') head = record.symref;
    else if (record.target !== undefined)
      updates.push({
        ref: record.ref,
        target: record.target,
        packs: record.packs,
        ...(record.peeled === undefined ? {} : { peeled: record.peeled }),
      });
  }
  return applyRefUpdates(
    undefined,
    updates,
    { repo: repoUri, ...(head === undefined ? {} : { head }), maintainer: false },
    new Date(),
  );
}

function sameListing(a: RemoteRef[], b: RemoteRef[]): boolean {
  if (a.length !== b.length) return false;
  const cids = new Map(a.map((r) => [r.key, r.cid]));
  return b.every((r) => cids.get(r.key) === r.cid);
}

/**
 * Deletes every `dev.knotless.ref` record of the repository (valid or not: once a table exists none
 * is read), 199 a commit, listing again until none is left; returns how many were deleted. A batch
 * that names a record deleted meanwhile (another migration) is refused whole, and the next round
 * lists what is left.
 */
async function deleteRecords(
  remote: RemoteRepo,
  auth: Authorizer,
  spent: { requests: number; points: number },
): Promise<number> {
  let deleted = 0;
  for (let round = 0; round < DELETE_ROUNDS; round++) {
    let keys: string[];
    try {
      const listed = await listKeyRange(
        remote.reader,
        remote.owner.did,
        REF_COLLECTION,
        refKeyPrefix(remote.name),
      );
      // A sealed record under a public repository's prefix is no record of it: not this migration's to delete.
      keys = listed.filter((r) => remote.isPrivate || !isSealed(r.value)).map((r) => rkeyOf(r.uri));
    } catch (err) {
      throw generalFailure(err, `listing the old ref records of ${remote.label}`);
    }
    if (keys.length === 0) return deleted;
    for (let i = 0; i < keys.length; i += DELETES_PER_COMMIT) {
      const batch = keys.slice(i, i + DELETES_PER_COMMIT);
      spent.requests++;
      spent.points += POINTS.delete * batch.length;
      try {
        await remote.writer(auth).procedure('com.atproto.repo.applyWrites', {
          repo: remote.owner.did,
          writes: batch.map((rkey) => ({
            $type: 'com.atproto.repo.applyWrites#delete',
            collection: REF_COLLECTION,
            rkey,
          })),
        });
      } catch (err) {
        // A record another process deleted first makes the PDS refuse the whole batch: list again.
        if (err instanceof XrpcError && err.status === 400 && round < DELETE_ROUNDS - 1) break;
        throw writeFailure(err, `deleting the old ref records of ${remote.label}`);
      }
      deleted += batch.length;
      crashPoint('migrate:records-deleted');
    }
  }
  throw new KnotlessError(
    'remote-changed',
    `The old ref records of ${remote.label} kept changing while they were being deleted; its refs are in its ref table, run \`knotless repo migrate ${remote.name}\` again to delete the rest.`,
  );
}
