import { prng } from '../../../../scripts/fuzz/gen.ts';
import type { FaultCase } from './checks.ts';

/** The share of each group `npm test` runs: hostile data in full (the checks that keep bad data out). */
const SHARE: Record<FaultCase['group'], number> = { hostile: 1, pds: 1 / 2, crash: 1 / 3 };

/**
 * The cases `npm test` runs: a seeded share of each group (at least three cases of each), so the
 * suite stays a minute or so while every run of `npm run faults` covers them all.
 */
export function seededSample(cases: FaultCase[], seed: number): FaultCase[] {
  const random = prng(seed);
  const picked = new Set<FaultCase>();
  for (const group of ['pds', 'hostile', 'crash'] as const) {
    const members = cases.filter((c) => c.group === group);
    const shuffled = members
      .map((c) => ({ c, k: random() }))
      .sort((a, b) => a.k - b.k)
      .map((x) => x.c);
    for (const c of shuffled.slice(0, Math.max(3, Math.ceil(members.length * SHARE[group])))) picked.add(c);
  }
  return cases.filter((c) => picked.has(c));
}
