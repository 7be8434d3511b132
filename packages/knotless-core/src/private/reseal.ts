import { KnotlessError } from '../errors.ts';
import { readProvedRecords, readRefTable } from '../records/read-refs.ts';
import type { RemoteRepo } from '../records/remote-repo.ts';
import { SwapConflict } from '../records/remote-repo.ts';
import { rewriteTable } from '../records/table-write.ts';
import type { Authorizer } from '../xrpc/client.ts';

/**
 * Seals the owner's refs again under the current key (after an unshare), and returns how many refs
 * were sealed again. A repository on a ref table has its table (and its parts) written again, one
 * compare-and-swap on the CID read, redone on what a push landed meanwhile; maintainers' tables are
 * sealed again by their next push. One on ref records has each record written again, each a
 * compare-and-swap on the CID read: a push that lands meanwhile wins, and its record is sealed again
 * on top. Packs are not re-encrypted: they hold what the removed member could read before. What is
 * written back is read verified first (the table with its proof, the records proved whole): each is
 * written back as it is read, signed by the owner, so a value a PDS or a proxy changed under its
 * record's CID would otherwise pass the swap and be written as the owner's.
 */
export async function resealRefs(remote: RemoteRepo, auth: Authorizer): Promise<number> {
  const table = remote.verifier === undefined ? undefined : await readRefTable(remote);
  if (table !== undefined) {
    const done = await rewriteTable(remote, auth, table, (read) =>
      Promise.resolve({
        kind: 'write',
        table: { ...read.table, seq: read.table.seq + 1, updatedAt: new Date().toISOString() },
      }),
    );
    if (done.kind === 'busy')
      throw new KnotlessError(
        'remote-changed',
        `The ref table of ${remote.label} kept changing while it was sealed again; the next push to it seals it under the new key.`,
      );
    return done.read.table.refs.length;
  }
  let n = 0;
  for (const listed of (await readProvedRecords(remote)).refs) {
    let ref: typeof listed | undefined = listed;
    for (let attempt = 0; ref !== undefined && attempt < 5; attempt++) {
      try {
        await remote.putRef(auth, ref.key, ref.record, ref.cid);
        n++;
        break;
      } catch (err) {
        if (!(err instanceof SwapConflict)) throw err;
        ref = await remote.getRef(ref.key);
      }
    }
  }
  return n;
}
