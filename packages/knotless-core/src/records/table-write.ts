// Writing a repository's ref table (format.md, "The ref table"): the owner's `dev.knotless.refs`
// record, laid out by ref-table.ts (one record, or parts past 256 KiB), written with `swapRecord` on
// the CID it was read at, so that the write itself proves the read it was decided on. Parts go
// first: their keys are the hash of their contents, so writing one again changes nothing, and a part
// no table lists yet is ignored by every reader. The parts a new table no longer lists are deleted
// after it lands. The writers that change a table whole (the default branch, a merge) decide and write
// it in one loop, rewriteTable, read again on a conflict.
import { KnotlessError, isKnotlessError } from '../errors.ts';
import type { Authorizer } from '../xrpc/client.ts';
import { REFS_COLLECTION, REFS_PART_COLLECTION } from './collections.ts';
import { SwapConflict, writeFailure } from './ref-writes.ts';
import {
  layoutRefTable,
  refTableKey,
  type RefTable,
  type StoredTable,
  type TableWrites,
} from './ref-table.ts';
import { readRefTable, type TableRead } from './read-refs.ts';
import type { RemoteRepo } from './remote-repo.ts';

/** Deletes per commit: the PDS's limit of 200 writes in one applyWrites, less one to spare. */
const DELETES_PER_COMMIT = 199;

/** What a table write landed: the table record's new CID and the commit's revision. */
export interface TableWritten {
  cid: string;
  rev: string;
}

/**
 * Writes `next` as the owner's table of `remote`, over `previous` (the table as read, whose CID is
 * the swap), or creates it when there was none (the swap names no record). A moved table is a
 * SwapConflict (records/ref-writes.ts), for the caller's loop to read again and decide anew.
 * `key` is another record key in `remote`'s account: a maintainer's table of another account's
 * repository (`remote` is then the repository as the maintainer's account holds it).
 */
export async function writeRefTable(
  remote: RemoteRepo,
  auth: Authorizer,
  next: RefTable,
  previous: Pick<TableRead, 'cid' | 'stored' | 'table'> | undefined,
  key?: string,
): Promise<TableWritten> {
  const did = remote.owner.did;
  key ??= refTableKey(remote.name, did, did);
  const writes = await tableLayout(
    remote,
    next,
    key,
    previous === undefined ? undefined : { table: previous.stored, joined: previous.table },
  );
  await writeTableParts(remote, auth, writes.create);
  const written = await putTableRecord(remote, auth, key, writes.table, {
    swapRecord: previous?.cid ?? null,
  });
  await removeParts(remote, auth, writes.remove);
  return written;
}

/**
 * The records to write for table `next` under `key` in `remote`'s account (ref-table.ts
 * `layoutRefTable`), sealed when the repository is private (format.md, "Private repositories"): the
 * table and each new part sealed whole under the current key epoch, bound to the account and key it
 * is written under, with parts keyed by a keyed digest, so neither ref names nor a part's contents
 * are in the clear. The repository's privacy is settled first: nothing is laid out in the clear
 * before it is known.
 */
export async function tableLayout(
  remote: RemoteRepo,
  next: RefTable,
  key: string,
  previous?: { table: StoredTable; joined: RefTable },
): Promise<TableWrites> {
  await remote.prepare();
  const { recordCid } = await import('./proof.ts');
  const sealer = remote.sealer;
  if (sealer === undefined)
    return layoutRefTable(next, key, (value) => Promise.resolve(recordCid(value)), previous);
  const account = remote.owner.did;
  // The CID a part is listed under is its sealed record's: sealed once, and that record written.
  const sealed = new Map<Record<string, unknown>, Record<string, unknown>>();
  const writes = await layoutRefTable(
    next,
    key,
    (value, rkey) => {
      const record = sealer.sealTable(account, REFS_PART_COLLECTION, rkey, value);
      sealed.set(value, record);
      return Promise.resolve(recordCid(record));
    },
    previous,
    (json) => sealer.partDigest(json),
  );
  return {
    table: sealer.sealTable(account, REFS_COLLECTION, key, writes.table),
    create: writes.create.map((p) => ({ rkey: p.rkey, value: sealed.get(p.value)! })),
    remove: writes.remove,
  };
}

/**
 * Writes parts of a table (before the table that lists them), each with `putRecord`: a part's key is
 * its contents' hash, so writing one again changes nothing, and one no table lists is never read.
 */
export async function writeTableParts(
  remote: RemoteRepo,
  auth: Authorizer,
  parts: { rkey: string; value: Record<string, unknown> }[],
): Promise<void> {
  const client = remote.writer(auth);
  for (const part of parts) {
    try {
      await client.procedure('com.atproto.repo.putRecord', {
        repo: remote.owner.did,
        collection: REFS_PART_COLLECTION,
        rkey: part.rkey,
        record: part.value,
        validate: false,
      });
    } catch (err) {
      throw writeFailure(err, `writing the refs of ${remote.label}`);
    }
  }
}

/**
 * Puts the owner's table record with the swaps given: `swapRecord` the CID it replaces (null: it must
 * not exist), `swapCommit` the account's commit the write was decided on, when it was decided on a
 * read of other records. A refused swap is a SwapConflict.
 */
export async function putTableRecord(
  remote: RemoteRepo,
  auth: Authorizer,
  key: string,
  record: Record<string, unknown>,
  swap: { swapRecord: string | null; swapCommit?: string },
): Promise<TableWritten> {
  try {
    const res = await remote
      .writer(auth)
      .procedure<{ cid: string; commit?: { rev?: string } }>('com.atproto.repo.putRecord', {
        repo: remote.owner.did,
        collection: REFS_COLLECTION,
        rkey: key,
        record,
        swapRecord: swap.swapRecord,
        ...(swap.swapCommit === undefined ? {} : { swapCommit: swap.swapCommit }),
        validate: false,
      });
    return { cid: res.cid, rev: res.commit?.rev ?? '' };
  } catch (err) {
    throw writeFailure(err, `writing the refs of ${remote.label}`);
  }
}

/**
 * Deletes parts no table lists any more, up to 199 a commit. The table is written already, and a
 * part it does not list is never read: a failure here leaves records that cost space, not a wrong
 * ref, so it is a warning and the push stands.
 */
export async function removeParts(remote: RemoteRepo, auth: Authorizer, keys: string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += DELETES_PER_COMMIT) {
    try {
      await remote.writer(auth).procedure('com.atproto.repo.applyWrites', {
        repo: remote.owner.did,
        writes: keys.slice(i, i + DELETES_PER_COMMIT).map((rkey) => ({
          $type: 'com.atproto.repo.applyWrites#delete',
          collection: REFS_PART_COLLECTION,
          rkey,
        })),
      });
    } catch (err) {
      const failure = writeFailure(err, `removing the old parts of the ref table of ${remote.label}`);
      if (!(failure instanceof KnotlessError)) throw failure;
      remote.warn(
        `${keys.length - i} part(s) of the ref table of ${remote.label} that it no longer lists were not removed (${failure.message.replace(/\.$/, '')}); they are never read`,
      );
      return;
    }
  }
}

/** What a writer makes of the table as read: this table to write, or nothing to write. */
export type TableChange = { kind: 'write'; table: RefTable } | { kind: 'none' };

/** How a rewrite ended: the table as it now stands, and whether this call wrote it. */
export type TableRewrite =
  | { kind: 'written'; read: TableRead }
  | { kind: 'unchanged'; read: TableRead }
  /** Every attempt found the table moved again. */
  | { kind: 'busy' };

/**
 * The loop of the writers that change a table whole rather than push to it (the default branch, a
 * merge): `change` decides the next table from `first`, it is written with {@link writeRefTable}
 * (swapped on the CID read), and when another writer moved the table meanwhile it is read again and
 * `change` decides again from what it now holds, so that no other write is lost. `change` may throw
 * a refusal, which ends the loop as it is. A write no answer settled (a time-out) is read back: it
 * landed when the table is the one written. The table gone meanwhile is `remote-changed`.
 */
export async function rewriteTable(
  remote: RemoteRepo,
  auth: Authorizer,
  first: TableRead,
  change: (read: TableRead) => Promise<TableChange>,
  maxAttempts = 5,
): Promise<TableRewrite> {
  const again = async (): Promise<TableRead> => {
    const read = await readRefTable(remote);
    if (read === undefined)
      throw new KnotlessError(
        'remote-changed',
        `The ref table of ${remote.label} was removed meanwhile (the repository deleted?); nothing was written.`,
      );
    return read;
  };
  let read = first;
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const step = await change(read);
    if (step.kind === 'none') return { kind: 'unchanged', read };
    try {
      const { cid, rev } = await writeRefTable(remote, auth, step.table, read);
      return { kind: 'written', read: { ...read, table: step.table, cid, rev } };
    } catch (err) {
      if (isKnotlessError(err) && err.unsure) {
        const now = await again().catch(() => undefined);
        if (now?.table.seq === step.table.seq && now.table.updatedAt === step.table.updatedAt)
          return { kind: 'written', read: now };
        throw err;
      }
      if (!(err instanceof SwapConflict)) throw err;
      read = await again();
    }
  }
  return { kind: 'busy' };
}
