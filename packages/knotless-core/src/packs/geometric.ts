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
