import { crashPoint } from '../../crash.ts';
import { mapLimit } from '../../packs/transfer.ts';
import { refKey } from '../../records/ref-key.ts';
import type { RefRecord } from '../../records/ref-record.ts';
import type { Update } from './check.ts';
import { MAX_WRITES_PER_COMMIT, headRecord, recordFor, type WriteJob, type Written } from './job.ts';

/** What batching left for the one-by-one writer. */
export interface Batched {
  written: Written[];
  /** Updates still to write (not new refs, or in a batch that did not land). */
  rest: Update[];
  /** The branch HEAD should still be pointed at, unless a batch already wrote HEAD. */
  head: string | undefined;
}

/**
 * Creates new refs in batches of one commit each (up to the PDS's 200 writes), instead of one record
 * write per ref: a mirror push of 500 refs is 3 commits, not 500, and the PDS signs each commit in
 * turn. A batch lands whole or not at all (see RemoteRepo.createRefs, which reads a batch back when
 * its answer is lost); refs not known written go back to the one-by-one writer, whose
 * compare-and-swap decides each ref as usual. A single new ref
 * without HEAD gains nothing, so it is left to that writer too.
 */
export async function createInBatches(job: WriteJob): Promise<Batched> {
  const { remote, auth } = job.env;
  const creates = job.updates.filter((u) => u.oid !== undefined && job.refs.get(u.dst) === undefined);
  // Worth a batch when it saves a request: two new refs, or one with the HEAD it brings.
  const headToo = job.head !== undefined && creates.some((u) => u.dst === job.head);
  if (creates.length + (headToo ? 1 : 0) < 2) return { written: [], rest: job.updates, head: job.head };
  const rest = job.updates.filter((u) => !creates.includes(u));
  const batches: Update[][] = [];
  // One slot per batch stays free for HEAD, which lands with its branch.
  for (let i = 0; i < creates.length; i += MAX_WRITES_PER_COMMIT - 1)
    batches.push(creates.slice(i, i + MAX_WRITES_PER_COMMIT - 1));
  // One at a time: sent together, the reference PDS's commits contend for the account's lock and
  // three batches of 199 took 4.3 s instead of 1.3 s.
  const results = await mapLimit(batches, 1, async (batch) => {
    const writes: { dst: string; key: string; record: RefRecord }[] = batch.map((u) => ({
      dst: u.dst,
      key: refKey(remote.name, u.dst),
      record: recordFor(remote, u, job.packs),
    }));
    const withHead = job.head !== undefined && batch.some((u) => u.dst === job.head);
    if (withHead)
      writes.push({ dst: 'HEAD', key: refKey(remote.name, 'HEAD'), record: headRecord(remote, job.head!) });
    crashPoint('push:before-record-write');
    const res = await remote.createRefs(auth, writes);
    if (res.some((r) => r !== undefined)) crashPoint('push:after-record-write');
    return { batch, writes, withHead, res };
  });
  const written: Written[] = [];
  let head = job.head;
  for (const { batch, writes, withHead, res } of results) {
    writes.forEach((w, n) => {
      const landed = res[n];
      if (landed === undefined) {
        const u = batch.find((b) => b.dst === w.dst);
        if (u !== undefined) rest.push(u);
        return;
      }
      if (withHead && w.dst === 'HEAD') head = undefined;
      written.push({ dst: w.dst, record: { key: w.key, ...landed, record: w.record } });
    });
  }
  return { written, rest, head };
}
