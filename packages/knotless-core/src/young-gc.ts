import v8 from 'node:v8';
import vm from 'node:vm';

type Gc = (opts: { type: 'minor'; execution: 'sync' }) => void;

/** V8's gc(), once reached; null where this Node does not give it (then nothing is collected early). */
let gc: Gc | null | undefined;
/** Bytes read off sockets and done with since the last collection. */
let pending = 0;

/** How many such bytes wait for a collection: about what a download adds to the process's peak. */
export const YOUNG_GC_BYTES = 4 * 1024 * 1024;

/**
 * Counts `bytes` read off a socket and no longer used (written to disk), and collects V8's young
 * generation once {@link YOUNG_GC_BYTES} of them have piled up. Each piece a socket reads is a
 * buffer of its own, freed only when V8 collects its small JavaScript object; V8 counts the young
 * generation by those objects' size, so tens of megabytes of dead buffers pile up in the C
 * allocator before it collects, and the allocator keeps the pages. A scavenge of a nearly empty
 * young generation costs a fraction of a millisecond (a few per 22 MiB pack).
 */
export function readDone(bytes: number): void {
  pending += bytes;
  if (pending < YOUNG_GC_BYTES) return;
  pending = 0;
  if (gc === undefined) {
    // V8 gives gc() to a context made while its flag is set: the flag is set for that one context
    // and reset at once, so no other code (nor the global object) ever sees it.
    v8.setFlagsFromString('--expose-gc');
    try {
      const fn: unknown = vm.runInNewContext('typeof gc === "function" ? gc : null');
      gc = typeof fn === 'function' ? (fn as Gc) : null;
    } finally {
      v8.setFlagsFromString('--no-expose-gc');
    }
  }
  gc?.({ type: 'minor', execution: 'sync' });
}
