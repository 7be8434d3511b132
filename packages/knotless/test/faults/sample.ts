import type { FaultCase } from './checks.ts';

/** A small seeded PRNG (mulberry32): the same seed gives the same sequence on every machine. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The cases `npm test` runs: every PDS-fault and hostile-data case (each takes a second or two), and
 * a seeded third of the crash cases (each pushes, kills, clones twice), at least four of them.
 */
export function seededSample(cases: FaultCase[], seed: number): FaultCase[] {
  const random = prng(seed);
  const crash = cases.filter((c) => c.group === 'crash');
  const shuffled = crash
    .map((c) => ({ c, k: random() }))
    .sort((a, b) => a.k - b.k)
    .map((x) => x.c);
  const picked = new Set(shuffled.slice(0, Math.max(4, Math.ceil(crash.length / 3))));
  return cases.filter((c) => c.group !== 'crash' || picked.has(c));
}
