import { crashPoint } from 'knotless-core/crash';
import { isKnotlessError, type PushReason } from 'knotless-core/errors';
import { presentObjects } from 'knotless-core/git/objects';
import { refKey, hashedRefKey } from 'knotless-core/records/ref-key';
import { unionPacks, type PackEntry, type RefRecord } from 'knotless-core/records/ref-record';
import { swapLoop } from 'knotless-core/ops/swap-loop';
import {
  BlobMissing,
  KeyRefused,
  SwapConflict,
  refsByName,
  type RemoteRef,
  type RemoteRepo,
  type RefWrite,
} from 'knotless-core/records/remote-repo';
import { mapLimit } from 'knotless-core/packs/transfer';
import { printErr } from 'knotless-core/text/terminal';
import type { Authorizer } from 'knotless-core/xrpc/client';
import { checkUpdate, type Update } from './push-check.ts';
import type { HelperState } from './state.ts';

/** Compare-and-swap retries per ref, and commit-race retries per atomic push. */
const MAX_ATTEMPTS = 5;
/** The PDS's limit on writes in one commit. */
export const MAX_WRITES_PER_COMMIT = 200;

/** How one ref's update ended; `record` is what the remote now holds (null: deleted). */
export interface Written {
  dst: string;
  /** Why git is told the ref failed (absent: it was updated). */
  error?: PushReason;
  record?: RemoteRef | null;
  /** A compare-and-swap found the ref changed: whatever view the push used was stale. */
  conflicted?: boolean;
  /** The PDS no longer holds a blob the record listed: the push rebuilds its pack list and retries. */
  blobMissing?: boolean;
}

/** git's reason for a ref whose write kept naming blobs the PDS no longer holds. */
export const BLOB_GONE: PushReason = 'a pack it builds on was removed';

/** Why an atomic push refused every ref: the one ref's reason (the others fail with it). */
type Refusal = { dst: string; reason: PushReason };

/** What every writer needs. */
export interface WriteJob {
  state: HelperState;
  remote: RemoteRepo;
  auth: Authorizer;
  updates: Update[];
  packs: PackEntry[];
  present: (oid: string) => boolean;
  /** The branch HEAD should name, when the repository has no HEAD yet. */
  head: string | undefined;
}

/**
 * Whether this repository has an object. `present` knows the values the push started from; a value
 * read back after a conflict is new, so it is looked up (another process may have pushed it from here).
 */
async function hasObject(job: WriteJob, oid: string): Promise<boolean> {
  return job.present(oid) || (await presentObjects([oid])).has(oid);
}

/** The record a ref gets when it is written to point at `u.oid`, with `packs`. */
export function recordFor(remote: RemoteRepo, u: Update, packs: PackEntry[]): RefRecord {
  return {
    repo: remote.name,
    ref: u.dst,
    target: u.oid!,
    ...(u.peeled === undefined ? {} : { peeled: u.peeled }),
    packs,
    updatedAt: new Date().toISOString(),
  };
}

/** The HEAD record naming `branch`. */
export function headRecord(remote: RemoteRepo, branch: string): RefRecord {
  return { repo: remote.name, ref: 'HEAD', symref: branch, packs: [], updatedAt: new Date().toISOString() };
}

/**
 * Writes one ref with compare-and-swap against the value git was shown. When the record changed
 * meanwhile: if only its packs changed (a compaction), build on them; a plain update still goes
 * through when it is a fast-forward of the new value; a forced update, a lease or a delete is
 * refused ("stale info"), as git's own receive-pack refuses to move a ref from a value it did not see.
 */
async function writeOne(job: WriteJob, u: Update): Promise<Written> {
  const { state, remote, auth } = job;
  const lease = state.options.cas.get(u.dst);
  // Only a write that lands (or a delete found done) says the view was stale, as before the loop.
  let conflicted = false;
  const done = (w: Written): Written => (conflicted ? { ...w, conflicted } : w);
  type Read = { current: RemoteRef | undefined; key: string; packs: PackEntry[] };
  const current = state.refs?.get(u.dst);
  const outcome = await swapLoop<Read, Read, Written, PushReason>({
    start: { current, key: current?.key ?? refKey(remote.name, u.dst), packs: job.packs },
    maxAttempts: MAX_ATTEMPTS,
    decide: (read) => Promise.resolve({ kind: 'write', write: read }),
    write: async ({ current, key, packs }) => {
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
    recover: (err, read) =>
      err instanceof KeyRefused && read.current === undefined
        ? { ...read, key: hashedRefKey(remote.name, u.dst) }
        : undefined,
    reread: async ({ current: before, key, packs }) => {
      conflicted = true;
      const current = await remote.getRef(key);
      // A delete that was retried after its first copy landed (the answer was lost) finds it done.
      if (u.oid === undefined && current === undefined)
        return { kind: 'done', value: done({ dst: u.dst, record: null }) };
      if (before !== undefined && current !== undefined && current.record.target === before.record.target) {
        const old = new Set(before.record.packs.map((p) => p.id));
        const union = unionPacks([current.record.packs, packs.filter((p) => !old.has(p.id))]);
        return { kind: 'again', state: { current, key, packs: union } };
      }
      if (u.force || u.oid === undefined || lease !== undefined) return { kind: 'refuse', why: 'stale info' };
      const verdict = await checkUpdate(u, current, undefined, (oid) => hasObject(job, oid));
      if (verdict.kind === 'reject') return { kind: 'refuse', why: verdict.reason };
      if (verdict.kind === 'up-to-date')
        return { kind: 'done', value: { dst: u.dst, ...(current === undefined ? {} : { record: current }) } };
      return { kind: 'again', state: { current, key, packs } };
    },
  });
  if (outcome.kind === 'done') return outcome.value;
  if (outcome.kind === 'refused') return { dst: u.dst, error: outcome.why };
  return { dst: u.dst, error: 'the ref kept changing; try again' };
}

/**
 * Writes each ref on its own (8 at a time), then HEAD if the repository had none. A ref whose write
 * fails for good (the PDS down past the retries) is reported as failed on its own: the others may
 * have landed, and git must be told exactly which did. Each kind of failure is printed once.
 */
export async function writeEach(job: WriteJob): Promise<Written[]> {
  const said = new Set<string>();
  const outcomes = await mapLimit(job.updates, 8, (u) =>
    writeOne(job, u).catch((err: unknown): Written => {
      if (err instanceof BlobMissing) return { dst: u.dst, error: BLOB_GONE, blobMissing: true };
      if (!isKnotlessError(err)) throw err;
      // One sentence per kind of failure: the refs it hit are git's lines to print.
      if (!said.has(err.code)) printErr(`knotless: ${err.message}`);
      said.add(err.code);
      return { dst: u.dst, error: err.reason };
    }),
  );
  const { head, remote, auth } = job;
  if (head !== undefined && outcomes.some((o) => o.dst === head && o.error === undefined)) {
    const key = refKey(remote.name, 'HEAD');
    const record = headRecord(remote, head);
    try {
      outcomes.push({
        dst: 'HEAD',
        record: { key, ...(await remote.putRef(auth, key, record, null)), record },
      });
    } catch (err) {
      if (!(err instanceof SwapConflict)) throw err;
    }
  }
  return outcomes;
}

/** Writes every ref in one commit that applies only if nothing in the account changed since it was read. */
export async function writeAtomic(job: WriteJob): Promise<Written[]> {
  const { state, remote, auth, updates, packs, head } = job;
  const fail = (error: PushReason) => updates.map((u) => ({ dst: u.dst, error }));
  if (updates.length + (head === undefined ? 0 : 1) > MAX_WRITES_PER_COMMIT) {
    printErr(
      `knotless: an atomic push can update at most ${MAX_WRITES_PER_COMMIT} refs (the PDS's limit per commit); push in smaller groups.`,
    );
    return fail('atomic push exceeds 200 refs');
  }
  // Each attempt reads the account afresh (its commit and every ref), so the value carried is nothing.
  const outcome = await swapLoop<null, { writes: RefWrite[]; commit: string }, Written[], Refusal>({
    start: null,
    maxAttempts: MAX_ATTEMPTS,
    decide: async () => {
      const commit = await remote.latestCommit();
      const { byName: refs, contested } = refsByName(await remote.listRefs());
      const writes: RefWrite[] = [];
      for (const u of updates) {
        if (contested.has(u.dst))
          return { kind: 'refuse', why: { dst: u.dst, reason: 'several records claim this ref' } };
        const current = refs.get(u.dst);
        const verdict = await checkUpdate(u, current, state.options.cas.get(u.dst), (oid) =>
          hasObject(job, oid),
        );
        if (verdict.kind === 'reject') return { kind: 'refuse', why: { dst: u.dst, reason: verdict.reason } };
        if (verdict.kind === 'up-to-date') continue;
        if (u.oid === undefined) {
          if (current !== undefined) writes.push({ action: 'delete', key: current.key });
        } else {
          writes.push({
            action: current === undefined ? 'create' : 'update',
            key: current?.key ?? refKey(remote.name, u.dst),
            record: recordFor(remote, u, packs),
          });
        }
      }
      if (head !== undefined && !refs.has('HEAD')) {
        writes.push({ action: 'create', key: refKey(remote.name, 'HEAD'), record: headRecord(remote, head) });
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
    reread: () => Promise.resolve({ kind: 'again', state: null }),
  });
  if (outcome.kind === 'done') return outcome.value;
  if (outcome.kind === 'refused') {
    const { dst, reason } = outcome.why;
    return updates.map((x) => ({ dst: x.dst, error: x.dst === dst ? reason : 'atomic push failed' }));
  }
  return fail('the account kept changing; try again');
}
