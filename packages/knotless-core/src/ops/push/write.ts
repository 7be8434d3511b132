import { crashPoint } from '../../crash.ts';
import { isKnotlessError, type PushReason } from '../../errors.ts';
import { mapLimit } from '../../packs/transfer.ts';
import { hashedRefKey } from '../../records/ref-key.ts';
import { unionPacks, type PackEntry } from '../../records/ref-record.ts';
import { KeyRefused, type RemoteRef } from '../../records/remote-repo.ts';
import { printErr } from '../../text/terminal.ts';
import { createHead } from '../head.ts';
import { swapLoop } from '../swap-loop.ts';
import { checkAgain, type Update } from './check.ts';
import { CreateBatches } from './create.ts';
import { BLOB_GONE, MAX_ATTEMPTS, hasObject, recordFor, type WriteJob, type Written } from './job.ts';

/** A batched create that did not land: the ref's loop goes on with a write of its own. */
class NotInBatch extends Error {}

/**
 * Writes one ref with compare-and-swap against the value git was shown. When the record changed
 * meanwhile: if only its packs changed (a compaction), build on them; a plain update still goes
 * through when it is a fast-forward of the new value; a forced update, a lease or a delete is
 * refused ("stale info"), as git's own receive-pack refuses to move a ref from a value it did not see.
 * A new ref in `batches` makes its first attempt as part of its batch's one commit.
 */
async function writeOne(job: WriteJob, u: Update, batches: CreateBatches | undefined): Promise<Written> {
  const { env } = job;
  const { remote, auth } = env;
  const lease = env.options.cas.get(u.dst);
  // Only a write that lands (or a delete found done) says the view was stale, as before the loop.
  let conflicted = false;
  const done = (w: Written): Written => (conflicted ? { ...w, conflicted } : w);
  type Read = { current: RemoteRef | undefined; key: string; packs: PackEntry[]; batched: boolean };
  const current = job.refs.get(u.dst);
  const batched = batches?.has(u.dst) === true;
  const outcome = await swapLoop<Read, Read, Written, PushReason>({
    start: { current, key: current?.key ?? remote.refKey(u.dst), packs: job.source.packs, batched },
    // The batched attempt is one more: the ref's own writes keep their full count.
    maxAttempts: MAX_ATTEMPTS + (batched ? 1 : 0),
    decide: (read) => Promise.resolve({ kind: 'write', write: read }),
    write: async ({ current, key, packs, batched }) => {
      if (batched) {
        const landed = await batches!.landed(u.dst);
        if (landed === undefined) throw new NotInBatch();
        return done({ dst: u.dst, record: landed });
      }
      crashPoint('push:before-record-write');
      if (u.oid === undefined) {
        if (current !== undefined) await remote.deleteRef(auth, current.key, current.cid);
        crashPoint('push:after-record-write');
        return done({ dst: u.dst, record: null });
      }
      const record = recordFor(remote, u, packs);
      const { cid, rev } = await remote.putRef(auth, key, record, current?.cid ?? null);
      crashPoint('push:after-record-write');
      return done({ dst: u.dst, record: { key, cid, rev, record } });
    },
    recover: (err, read) => {
      // The batch's refusal says nothing of which write it refused: this ref's own write will.
      if (err instanceof NotInBatch) return { ...read, batched: false, packs: job.source.packs };
      return err instanceof KeyRefused && read.current === undefined
        ? {
            ...read,
            key: remote.sealer === undefined ? hashedRefKey(remote.name, u.dst) : remote.refKey(u.dst),
          }
        : undefined;
    },
    // The compare-and-swap still names the value git was shown: the rebuild changes what is built
    // on, never what is replaced.
    relist: async (read) => ({ ...read, packs: await job.source.rebuild() }),
    reread: async ({ current: before, key, packs }, _write, why) => {
      conflicted = true;
      const current = await remote.getRef(key);
      // No answer told whether the write landed: it did when the ref is now what it wrote.
      if (why === 'unsure' && u.oid !== undefined && current?.record.target === u.oid)
        return { kind: 'done', value: done({ dst: u.dst, record: current }) };
      // A delete that was retried after its first copy landed (the answer was lost) finds it done.
      if (u.oid === undefined && current === undefined)
        return { kind: 'done', value: done({ dst: u.dst, record: null }) };
      if (before !== undefined && current !== undefined && current.record.target === before.record.target) {
        const old = new Set(before.record.packs.map((p) => p.id));
        const union = unionPacks([current.record.packs, packs.filter((p) => !old.has(p.id))]);
        return { kind: 'again', state: { current, key, packs: union, batched: false } };
      }
      // The agent's view behind the account: a swap on its commit was refused.
      const verdict = await checkAgain(
        u,
        current,
        lease,
        remote.viewProof?.state === 'broken',
        (oid) => hasObject(job, oid),
        env.gitDir,
      );
      if (verdict.kind === 'reject') return { kind: 'refuse', why: verdict.reason };
      if (verdict.kind === 'up-to-date')
        return { kind: 'done', value: { dst: u.dst, ...(current === undefined ? {} : { record: current }) } };
      // The record that holds the ref now (another machine may have made it under another key).
      return { kind: 'again', state: { current, key: current?.key ?? key, packs, batched: false } };
    },
  });
  if (outcome.kind === 'done') return outcome.value;
  if (outcome.kind === 'refused') return { dst: u.dst, error: outcome.why };
  if (outcome.cause === 'blob-missing') return { dst: u.dst, error: BLOB_GONE, blobMissing: true };
  return { dst: u.dst, error: 'the ref kept changing; try again' };
}

/**
 * Writes each ref on its own loop (8 at a time): new refs first, their first attempts in batches
 * (CreateBatches), then the others; then HEAD if the repository had none. A ref whose write fails
 * for good (the PDS down past the retries) is reported as failed on its own: the others may have
 * landed, and git must be told exactly which did. Each kind of failure is printed once.
 */
export async function writeEach(job: WriteJob): Promise<Written[]> {
  const said = new Set<string>();
  const batches = CreateBatches.plan(job);
  const one = (u: Update) =>
    writeOne(job, u, batches).catch((err: unknown): Written => {
      if (!isKnotlessError(err)) throw err;
      // One sentence per kind of failure: the refs it hit are git's lines to print.
      if (!said.has(err.code)) printErr(`knotless: ${err.message}`);
      said.add(err.code);
      return { dst: u.dst, error: err.reason };
    });
  const outcomes = [
    ...(batches === undefined ? [] : await mapLimit(batches.members, 8, one)),
    ...(await mapLimit(
      job.updates.filter((u) => batches?.has(u.dst) !== true),
      8,
      one,
    )),
  ];
  const { head } = job;
  const headBatched = batches?.head;
  if (headBatched !== undefined) outcomes.push({ dst: 'HEAD', record: headBatched });
  else if (head !== undefined && outcomes.some((o) => o.dst === head && o.error === undefined)) {
    const wrote = await createHead(job.env.remote, job.env.auth, head);
    if (wrote !== undefined) outcomes.push({ dst: 'HEAD', record: wrote });
  }
  return outcomes;
}
