import { readProvedRecords } from '../records/read-refs.ts';
import type { RemoteRepo } from '../records/remote-repo.ts';
import { SwapConflict } from '../records/remote-repo.ts';
import type { Authorizer } from '../xrpc/client.ts';

/**
 * Writes every ref record again under the current key (after an unshare), each a compare-and-swap
 * on the CID read: a push that lands meanwhile wins, and its record is sealed again on top. Returns
 * how many records were sealed again. Packs are not re-encrypted: they hold what the removed member
 * could read before. The records are proved whole first: each is written back as it is read, signed
 * by the owner, so a value a PDS or a proxy changed under its record's CID would otherwise pass the
 * swap and be written as the owner's.
 */
export async function resealRefs(remote: RemoteRepo, auth: Authorizer): Promise<number> {
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
