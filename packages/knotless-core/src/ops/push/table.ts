import { crashPoint } from '../../crash.ts';
import type { PushReason } from '../../errors.ts';
import {
  lastTableRead,
  readRefTable,
  readTeamRefs,
  useTableRead,
  useTeamRead,
  type TableRead,
} from '../../records/read-refs.ts';
import { maintainersOf, refTableKey, type RefUpdate, applyRefUpdates } from '../../records/ref-table.ts';
import { unionPacks, type PackEntry } from '../../records/ref-record.ts';
import type { RemoteRef } from '../../records/remote-repo.ts';
import { writeRefTable } from '../../records/table-write.ts';
import { swapLoop } from '../swap-loop.ts';
import { checkAgain, type Update } from './check.ts';
import { writeTeam } from './team-push.ts';
import { BLOB_GONE, MAX_ATTEMPTS, hasObject, type WriteJob, type Written } from './job.ts';

/** A ref's decision as it stands: write this update with these packs, or settled (done or refused). */
type Decision =
  { kind: 'write'; packs: PackEntry[]; seen: string | undefined } | { kind: 'settled'; written: Written };

interface TableState {
  read: TableRead;
  decisions: Map<string, Decision>;
  /** Attempts in which a pushed ref itself was found changed: bounded as one ref's retries are. */
  moved: number;
}

/** The value of `ref` in a table read, as the ref records' readers see one. */
function entryOf(read: TableRead, ref: string) {
  return read.table.refs.find((r) => r.ref === ref && r.target !== undefined);
}

/** A table entry in the form checkUpdate judges (a ref record read from the table). */
function asRemote(read: TableRead, ref: string, key: string): RemoteRef | undefined {
  const e = entryOf(read, ref);
  if (e === undefined) return undefined;
  const record = { repo: '', ref, target: e.target!, packs: e.packs, updatedAt: read.table.updatedAt };
  return {
    key: `${key}#${ref}`,
    cid: read.cid,
    rev: read.rev,
    record: e.peeled === undefined ? record : { ...record, peeled: e.peeled },
  };
}

/**
 * Writes a push to a repository whose refs are in a ref table: every ref in ONE write of the table,
 * with `swapRecord` on the CID it was read at. When the table moved meanwhile (another push, a
 * compaction), it is read again (verified) and each ref decided again with git's rules against the
 * value it now has: a ref no one else touched keeps its decision, so two pushes to different
 * branches never fail each other; one whose packs alone changed (a compaction) builds on them; one
 * whose value moved is judged as git would (a force, a delete or a lease is refused as stale, a
 * plain update goes on only as a fast-forward). Those attempts are bounded, as one ref's are; an
 * atomic push fails whole when any of its refs is refused.
 */
export async function writeTable(job: WriteJob): Promise<Written[]> {
  const { env, updates } = job;
  const { remote, auth } = env;
  const first = lastTableRead(remote) ?? (await readRefTable(remote));
  if (first === undefined) throw new Error(`${remote.label} has no ref table to write`);
  const key = refTableKey(remote.name, remote.owner.did, remote.owner.did);
  const decisions = new Map<string, Decision>(
    updates.map((u) => [
      u.dst,
      { kind: 'write', packs: job.source.packs, seen: job.refs.get(u.dst)?.record.target },
    ]),
  );
  const refusedAll = (why: PushReason, dst: string): Written[] =>
    updates.map((u) => ({ dst: u.dst, error: u.dst === dst ? why : 'atomic push failed' }));
  let last: TableState = { read: first, decisions, moved: 0 };
  const outcome = await swapLoop<TableState, RefUpdate[], Written[], Written[]>({
    start: last,
    // Conflicts on the table that left every pushed ref as it was do not count against the bound on
    // moves (below); this caps a table that never stops changing.
    maxAttempts: MAX_ATTEMPTS * 4,
    decide: (state) => {
      last = state;
      if (state.moved >= MAX_ATTEMPTS)
        return Promise.resolve(
          env.options.atomic
            ? {
                kind: 'refuse',
                why: updates.map((u) => ({ dst: u.dst, error: 'the ref kept changing; try again' })),
              }
            : { kind: 'done', value: keptChanging(state) },
        );
      const writes: RefUpdate[] = [];
      for (const u of updates) {
        const d = state.decisions.get(u.dst)!;
        if (d.kind !== 'write') continue;
        writes.push(
          u.oid === undefined
            ? { ref: u.dst }
            : {
                ref: u.dst,
                target: u.oid,
                packs: d.packs,
                ...(u.peeled === undefined ? {} : { peeled: u.peeled }),
              },
        );
      }
      if (writes.length === 0) return Promise.resolve({ kind: 'done', value: settled(state) });
      return Promise.resolve({ kind: 'write', write: writes });
    },
    write: async (writes, state) => {
      const next = applyRefUpdates(
        state.read.table,
        writes,
        {
          repo: state.read.table.repo,
          ...(job.head === undefined ? {} : { head: job.head }),
          maintainer: false,
        },
        new Date(),
      );
      crashPoint('push:before-record-write');
      const { cid, rev } = await writeRefTable(remote, auth, next, state.read);
      crashPoint('push:after-record-write');
      // Swapped on the very table the warm agent's view gave git: the whole listing was true.
      if (remote.viewProof?.state === 'pending' && remote.viewProof.commit === state.read.cid)
        remote.viewProof.state = 'proven';
      const { raw: _raw, ...read } = state.read;
      const landed: TableRead = { ...read, table: next, cid, rev };
      // What the write proved is what the refs are now, as far as this push knows.
      useTableRead(remote, landed);
      return updates.map((u) => {
        const d = state.decisions.get(u.dst)!;
        if (d.kind === 'settled') return d.written;
        const record = u.oid === undefined ? null : asRemote(landed, u.dst, key)!;
        return { dst: u.dst, record, ...(state.moved > 0 ? { conflicted: true } : {}) };
      });
    },
    reread: async (state, writes, why) => {
      // The warm agent's view was behind the table: what git judged of refs it did not push may be
      // wrong, which the helper checks before it exits (HelperState.checkView).
      if (why === 'conflict' && remote.viewProof?.state === 'pending') remote.viewProof.state = 'broken';
      const read = await readRefTable(remote);
      if (read === undefined) throw new Error(`the ref table of ${remote.label} is gone`);
      useTableRead(remote, read);
      // No answer told whether the write landed: it did when every ref is now what it wrote.
      if (why === 'unsure') {
        const landed = writes.every((w) => entryOf(read, w.ref)?.target === w.target);
        if (landed)
          return {
            kind: 'done',
            value: updates.map((u) => {
              const d = state.decisions.get(u.dst)!;
              return d.kind === 'settled'
                ? d.written
                : { dst: u.dst, record: u.oid === undefined ? null : asRemote(read, u.dst, key)! };
            }),
          };
      }
      // The owner named maintainers meanwhile: the push is a team's now, decided again against every
      // writer's value (team-push.ts) rather than written into the owner's table alone.
      if (maintainersOf(read.table, remote.owner.did).length > 0) {
        const team = await readTeamRefs(remote, read);
        useTeamRead(remote, team);
        return { kind: 'done', value: await writeTeam(job, team) };
      }
      const decisions = new Map(state.decisions);
      let moved = false;
      for (const u of updates) {
        const d = decisions.get(u.dst)!;
        if (d.kind !== 'write') continue;
        const now = entryOf(read, u.dst);
        const before = entryOf(state.read, u.dst);
        if (now?.target === d.seen) {
          // Untouched, or only its packs changed (a compaction): build on the packs it has now.
          if (before !== undefined && now !== undefined && u.oid !== undefined) {
            const old = new Set(before.packs.map((p) => p.id));
            const packs = unionPacks([now.packs, d.packs.filter((p) => !old.has(p.id))]);
            decisions.set(u.dst, { ...d, packs });
          }
          continue;
        }
        moved = true;
        const redo = await decideAgain(
          job,
          u,
          asRemote(read, u.dst, key),
          remote.viewProof?.state === 'broken',
        );
        if (redo.kind === 'refuse') {
          if (env.options.atomic) return { kind: 'refuse', why: refusedAll(redo.why, u.dst) };
          decisions.set(u.dst, {
            kind: 'settled',
            written: { dst: u.dst, error: redo.why, conflicted: true },
          });
        } else if (redo.kind === 'up-to-date') {
          const rec = asRemote(read, u.dst, key);
          decisions.set(u.dst, {
            kind: 'settled',
            written: { dst: u.dst, ...(rec === undefined ? {} : { record: rec }), conflicted: true },
          });
        } else decisions.set(u.dst, { ...d, seen: now?.target });
      }
      return { kind: 'again', state: { read, decisions, moved: state.moved + (moved ? 1 : 0) } };
    },
    relist: async (state) => {
      const packs = await job.source.rebuild();
      const decisions = new Map(
        [...state.decisions].map(([dst, d]) => [dst, d.kind === 'write' ? { ...d, packs } : d]),
      );
      return { ...state, decisions };
    },
  });
  if (outcome.kind === 'done') return outcome.value;
  if (outcome.kind === 'refused') return outcome.why;
  if (outcome.cause === 'blob-missing')
    return updates.map((u) => ({ dst: u.dst, error: BLOB_GONE, blobMissing: true }));
  if (env.options.atomic)
    return updates.map((u) => ({ dst: u.dst, error: 'the ref kept changing; try again' }));
  return keptChanging(last);
}

/** Each ref still to write when the bound on attempts ran out fails; the settled ones stand. */
function keptChanging(state: TableState): Written[] {
  return [...state.decisions].map(([dst, d]) =>
    d.kind === 'settled' ? d.written : { dst, error: 'the ref kept changing; try again' },
  );
}

/** What each ref's decision came to, when none is left to write. */
function settled(state: TableState): Written[] {
  return [...state.decisions].map(([dst, d]) => (d.kind === 'settled' ? d.written : { dst }));
}

/**
 * One ref decided again on the value another push left it at, by the rule writeOne (write.ts) decides
 * a ref record by after a conflict (checkAgain); `agentBehind`: git decided on the warm agent's view
 * of the table, and the refused swap showed it behind.
 */
async function decideAgain(
  job: WriteJob,
  u: Update,
  current: RemoteRef | undefined,
  agentBehind: boolean,
): Promise<{ kind: 'write' } | { kind: 'up-to-date' } | { kind: 'refuse'; why: PushReason }> {
  const lease = job.env.options.cas.get(u.dst);
  const present = (oid: string) => hasObject(job, oid);
  const verdict = await checkAgain(u, current, lease, agentBehind, present, job.env.gitDir);
  if (verdict.kind === 'reject') return { kind: 'refuse', why: verdict.reason };
  return verdict;
}
