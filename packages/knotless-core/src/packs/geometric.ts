import type { PackEntry } from '../records/ref-record.ts';

/** Each pack kept must be at least this many times the size of everything listed after it. */
export const GEOMETRIC_FACTOR = 2;

/**
 * Where to cut a pack list so that merging everything from the cut on leaves a geometric list
 * (like `git repack --geometric=2`, but in list order, since later packs are thin against earlier
 * ones): the smallest merge that makes each kept pack at least twice the size of all packs after
 * it. Returns undefined when the list is already geometric. Large base packs, which other branches
 * share, are thus kept; small recent ones are merged, so a list stays logarithmic in length.
 */
export function planMerge(packs: PackEntry[]): number | undefined {
  if (!packs.some((p) => p.holds !== undefined)) return planSizes(packs.map((p) => p.size));
  // A list split into structure and blobs (format.md, "Structure apart from blobs") is two lists
  // interleaved, each geometric on its own: a push's small structure pack follows its large blob
  // pack by nature. Each kind is planned apart (a pack of both kinds counts in both), and the list
  // is cut at the earlier of the two cuts. Large blob packs (`blob`) are never merged.
  let cut: number | undefined;
  for (const at of kindIndices(packs)) {
    const c = planSizes(at.map((i) => packs[i]!.size));
    if (c !== undefined && (cut === undefined || at[c]! < cut)) cut = at[c]!;
  }
  return cut;
}

/**
 * The positions in a split list of each kind's own list: the structure packs, then the blob packs
 * (`blobs`; a pack of one large blob, which is never merged, in neither), a pack without `holds` in
 * both.
 */
function kindIndices(packs: PackEntry[]): number[][] {
  return (['structure', 'blobs'] as const).map((kind) =>
    packs.flatMap((p, i) => (p.holds === undefined || p.holds.kind === kind ? [i] : [])),
  );
}

/** {@link planMerge} over the sizes of one list. */
function planSizes(sizes: number[]): number | undefined {
  const packs = sizes.map((size) => ({ size }));
  const n = packs.length;
  const suffix = new Array<number>(n + 1).fill(0);
  for (let i = n - 1; i >= 0; i--) suffix[i] = suffix[i + 1]! + packs[i]!.size;
  // The kept prefix must itself be geometric: find where it first breaks.
  let geometricUpTo = n;
  for (let i = 0; i < n - 1; i++) {
    if (packs[i]!.size < GEOMETRIC_FACTOR * suffix[i + 1]!) {
      geometricUpTo = i;
      break;
    }
  }
  if (geometricUpTo >= n - 1) return undefined;
  // Merging from `cut` on keeps packs [0, cut); each must outweigh the rest, merged pack included,
  // and the sums after a cut do not change with the cut, so the first break is where to cut.
  return geometricUpTo;
}

/** How many times longer than a geometric list a pack list may grow before a compaction of its own runs. */
export const COMPACT_SLACK = 2;

/**
 * Whether a pack list wants a compaction of its own (a separate record write): only when it is far
 * longer than logarithmic. Pushes and `repo commit` fold the small packs at the end of the list into
 * their own write (fold.ts), so in steady state this stays false; it turns true when big packs pile
 * up (each large push adds one) or folding was not possible.
 */
export function compactionDue(packs: PackEntry[]): boolean {
  if (packs.length < 2 || planMerge(packs) === undefined) return false;
  // A split list is two lists, each as long as an unsplit one would be: each kind is judged apart, so
  // that a list of N pushes, 2N packs, is due when N unsplit packs would be.
  if (packs.some((p) => p.holds !== undefined))
    return kindIndices(packs).some((at) => tooLong(at.map((i) => packs[i]!)));
  return tooLong(packs);
}

/** Whether one list of packs is far longer than a geometric list of the same bytes would be. */
function tooLong(packs: PackEntry[]): boolean {
  if (packs.length < 2) return false;
  const total = packs.reduce((n, p) => n + p.size, 0);
  const smallest = Math.max(1, Math.min(...packs.map((p) => p.size)));
  // A geometric list (factor 2) whose smallest pack is `smallest` holds at most this many packs.
  const geometric = Math.floor(Math.log2(total / smallest)) + 1;
  return packs.length > COMPACT_SLACK * geometric;
}
