import { crashPoint } from '../../crash.ts';
import type { PushReason } from '../../errors.ts';
import { headRecord } from '../head.ts';
import { readProvedRecords } from '../../records/read-refs.ts';
import type { PackEntry } from '../../records/ref-record.ts';
import { refsByName, type RefWrite } from '../../records/remote-repo.ts';
import { printErr } from '../../text/terminal.ts';
import { swapLoop } from '../swap-loop.ts';
import { checkUpdate } from './check.ts';
import {
  BLOB_GONE,
  MAX_ATTEMPTS,
  MAX_WRITES_PER_COMMIT,
  hasObject,
  recordFor,
  type WriteJob,
  type Written,
} from './job.ts';

/** Why an atomic push refused every ref: the one ref's reason (the others fail with it). */
type Refusal = { dst: string; reason: PushReason };

/** Writes every ref in one commit that applies only if nothing in the account changed since it was read. */
export async function writeAtomic(job: WriteJob): Promise<Written[]> {
  const { env, updates, head } = job;
  const { remote, auth } = env;
  const fail = (error: PushReason) => updates.map((u) => ({ dst: u.dst, error }));
  if (updates.length + (head === undefined ? 0 : 1) > MAX_WRITES_PER_COMMIT) {
    printErr(
      `knotless: an atomic push can update at most ${MAX_WRITES_PER_COMMIT} refs (the PDS's limit per commit); push in smaller groups.`,
    );
    return fail('atomic push exceeds 200 refs');
  }
  // Each attempt reads the account afresh (every ref, proved whole at the commit the write then
  // swaps on: a listing nobody proved could hide another machine's push, which this write would
  // then replace), so the value carried is only the pack list the records carry, which changes
  // when a blob it lists is gone.
  const outcome = await swapLoop<PackEntry[], { writes: RefWrite[]; commit: string }, Written[], Refusal>({
    start: job.source.packs,
    maxAttempts: MAX_ATTEMPTS,
    decide: async (packs) => {
      const proved = await readProvedRecords(remote);
      const commit = proved.commit;
      const { byName: refs, contested } = refsByName(proved.refs);
      const writes: RefWrite[] = [];
      for (const u of updates) {
        if (contested.has(u.dst))
          return { kind: 'refuse', why: { dst: u.dst, reason: 'several records claim this ref' } };
        const current = refs.get(u.dst);
        const verdict = await checkUpdate(
          u,
          current,
          env.options.cas.get(u.dst),
          (oid) => hasObject(job, oid),
          env.gitDir,
        );
        if (verdict.kind === 'reject') return { kind: 'refuse', why: { dst: u.dst, reason: verdict.reason } };
        if (verdict.kind === 'up-to-date') continue;
        if (u.oid === undefined) {
          if (current !== undefined) writes.push({ action: 'delete', key: current.key });
        } else {
          writes.push({
            action: current === undefined ? 'create' : 'update',
            key: current?.key ?? remote.refKey(u.dst),
            record: recordFor(remote, u, packs),
          });
        }
      }
      if (head !== undefined && !refs.has('HEAD')) {
        writes.push({ action: 'create', key: remote.refKey('HEAD'), record: headRecord(remote, head) });
      }
      if (writes.length === 0) return { kind: 'done', value: updates.map((u) => ({ dst: u.dst })) };
      return { kind: 'write', write: { writes, commit } };
    },
    write: async ({ writes, commit }) => {
      crashPoint('push:before-record-write');
      await remote.applyWrites(auth, writes, commit);
      crashPoint('push:after-record-write');
      // applyWrites does not return the new CIDs: the view forgets these refs and lists next time.
      return updates.map((u) => ({ dst: u.dst }));
    },
    reread: async (packs, _write, why) => {
      // No answer told whether the commit landed: it did when every ref is now what the push asked.
      if (why === 'unsure') {
        const { byName } = refsByName((await readProvedRecords(remote)).refs);
        const landed = updates.every((u) =>
          u.oid === undefined ? !byName.has(u.dst) : byName.get(u.dst)?.record.target === u.oid,
        );
        if (landed) return { kind: 'done', value: updates.map((u) => ({ dst: u.dst })) };
      }
      return { kind: 'again', state: packs };
    },
    relist: () => job.source.rebuild(),
  });
  if (outcome.kind === 'done') return outcome.value;
  if (outcome.kind === 'refused') {
    const { dst, reason } = outcome.why;
    return updates.map((x) => ({ dst: x.dst, error: x.dst === dst ? reason : 'atomic push failed' }));
  }
  if (outcome.cause === 'blob-missing')
    return updates.map((u) => ({ dst: u.dst, error: BLOB_GONE, blobMissing: true }));
  return fail('the account kept changing; try again');
}
