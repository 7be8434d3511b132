import { isKnotlessError } from '../errors.ts';
import { BlobMissing, SwapConflict } from '../records/remote-repo.ts';

/**
 * What `decide` makes of the value it was handed: write this, nothing to write (the value already is
 * what was wanted), refuse with a typed reason, or decide again from another value (after reading
 * again on a failure of its own, such as a blob gone while syncing packs).
 */
export type SwapStep<S, W, R, Why> =
  | { kind: 'write'; write: W }
  | { kind: 'done'; value: R }
  | { kind: 'refuse'; why: Why }
  /** `free`: not counted as an attempt (the caller bounds those itself); still capped by the loop. */
  | { kind: 'again'; state: S; free?: boolean };

/** How the loop ended. `conflicted`: some write found the value changed since it was read. */
export type SwapOutcome<R, Why> =
  | { kind: 'done'; value: R; conflicted: boolean }
  | { kind: 'refused'; why: Why; conflicted: boolean }
  /** Every attempt conflicted, or the write named missing blobs again after the one rebuild. */
  | { kind: 'exhausted'; cause: 'conflict' | 'blob-missing'; conflicted: boolean; last?: unknown };

/**
 * One compare-and-swap loop for every ref record write: a push's (each ref, its batched creates'
 * first attempt, `--atomic`'s one commit, contested deletes), HEAD's create-if-absent (ops/head.ts),
 * `repo commit`, compaction. `S` is what was read (the ref and its CID, and whatever the caller keeps with it),
 * `W` one write, `R` what a finished loop gives back, `Why` a refusal's typed reason.
 */
export interface SwapPlan<S, W, R, Why> {
  /** The value read before the first attempt. */
  start: S;
  maxAttempts: number;
  decide: (state: S) => Promise<SwapStep<S, W, R, Why>>;
  /** The compare-and-swap write itself (putRecord / deleteRecord / applyWrites with a swap). */
  write: (write: W, state: S) => Promise<R>;
  /**
   * After a SwapConflict: the value read again, which `decide` sees next; or the end, when what was
   * read settles it (the write had landed, or git's rules refuse to build on the new value). It is
   * judged even after the last attempt, so that a landed write is never reported as a failure.
   * `unsure`: after a write whose fate no answer told (see below); only `done` (it landed) counts then.
   */
  reread: (
    state: S,
    write: W,
    why: 'conflict' | 'unsure',
  ) => Promise<Exclude<SwapStep<S, W, R, Why>, { kind: 'write' }>>;
  /**
   * After a BlobMissing: the refs listed again so that `decide` rebuilds on what is there now; done
   * once, a second BlobMissing ends the loop. Without it, BlobMissing goes to the caller.
   */
  relist?: (state: S) => Promise<S>;
  /** Another failure of the write the caller can retry from (a refused key): the next value, or undefined. */
  recover?: (err: unknown, state: S) => S | undefined;
}

export async function swapLoop<S, W, R, Why>(plan: SwapPlan<S, W, R, Why>): Promise<SwapOutcome<R, Why>> {
  let state = plan.start;
  let conflicted = false;
  let relisted = false;
  let free = 0;
  for (let attempt = 0; attempt < plan.maxAttempts; attempt++) {
    const step = await plan.decide(state);
    if (step.kind === 'done') return { kind: 'done', value: step.value, conflicted };
    if (step.kind === 'refuse') return { kind: 'refused', why: step.why, conflicted };
    if (step.kind === 'again') {
      state = step.state;
      if (step.free === true && free++ < plan.maxAttempts) attempt--;
      continue;
    }
    try {
      return { kind: 'done', value: await plan.write(step.write, state), conflicted };
    } catch (err) {
      if (err instanceof SwapConflict) {
        conflicted = true;
        const next = await plan.reread(state, step.write, 'conflict');
        if (next.kind === 'done') return { kind: 'done', value: next.value, conflicted };
        if (next.kind === 'refuse') return { kind: 'refused', why: next.why, conflicted };
        state = next.state;
        continue;
      }
      if (err instanceof BlobMissing && plan.relist !== undefined) {
        if (relisted) return { kind: 'exhausted', cause: 'blob-missing', conflicted, last: err };
        relisted = true;
        state = await plan.relist(state);
        continue;
      }
      if (isKnotlessError(err) && err.unsure) {
        // Sent, and no answer said what became of it (a time-out, the agent gone mid-request): read
        // the record back rather than guess. Landed: done. Not landed: the failure stands, except
        // that a write the agent dropped goes again, directly.
        // A read that fails too leaves the first failure to be reported: it is thrown below.
        const after = await plan.reread(state, step.write, 'unsure').catch(() => undefined);
        if (after?.kind === 'done') return { kind: 'done', value: after.value, conflicted };
        if (after?.kind === 'again' && err.agentGone) {
          state = after.state;
          continue;
        }
        throw err;
      }
      const next = plan.recover?.(err, state);
      if (next === undefined) throw err;
      state = next;
    }
  }
  return { kind: 'exhausted', cause: 'conflict', conflicted };
}
