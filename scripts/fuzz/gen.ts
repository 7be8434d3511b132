// Seeded generation for the fuzz scripts: the same seed gives the same cases on every machine, so a
// failure prints the seed and case number that reproduce it.

/** A small seeded PRNG (mulberry32), uniform on [0, 1). */
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

/** Characters that break parsers: separators, escapes, dots, controls, and some far from ASCII. */
const NASTY = [
  '/',
  '.',
  '..',
  '~',
  '_',
  ':',
  '%',
  '%2F',
  '%2E',
  '%E0',
  '%',
  '@',
  '\\',
  ' ',
  '\t',
  '\n',
  '\0',
  '^',
  '{',
  '}',
  '*',
  '?',
  '[',
  '#',
  '&',
  '=',
  '+',
  '-',
  '\u00e9',
  '\u00fc',
  '\u202e',
  '\ufeff',
  '\u{1f600}',
  '\u{10ffff}',
  'refs/',
  'HEAD',
  '.lock',
  '@{',
  '//',
  '.git',
];

/** Random values of many shapes, from one seed. */
export class Gen {
  readonly random: () => number;

  constructor(seed: number) {
    this.random = prng(seed);
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.random() * n);
  }

  bool(p = 0.5): boolean {
    return this.random() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** A string of up to `max` pieces drawn from `alphabet`. */
  from(alphabet: string, max: number): string {
    let s = '';
    for (let i = this.int(max + 1); i > 0; i--) s += alphabet[this.int(alphabet.length)];
    return s;
  }

  /** A well-formed Unicode string mixing plain text with the nasty pieces above. */
  text(max = 24): string {
    let s = '';
    for (let i = this.int(max + 1); i > 0; i--) {
      const r = this.random();
      if (r < 0.5) s += this.from('abcdefghijklmnopqrstuvwxyzABCXYZ0123456789-', 1);
      else if (r < 0.85) s += this.pick(NASTY);
      else s += String.fromCodePoint(this.codePoint());
    }
    return s;
  }

  /** Any Unicode scalar value (no lone surrogates). */
  codePoint(): number {
    const c = this.bool(0.7) ? this.int(0x800) : this.int(0x10ffff);
    return c >= 0xd800 && c <= 0xdfff ? c - 0x800 : c;
  }

  /** Hex digits. */
  hex(n: number): string {
    return this.from('0123456789abcdef', n).padEnd(n, '0').slice(0, n);
  }

  /** A JSON value of bounded depth, with numbers and strings chosen to hit edge cases. */
  json(depth = 3): unknown {
    const r = this.int(depth <= 0 ? 5 : 8);
    switch (r) {
      case 0:
        return null;
      case 1:
        return this.bool();
      case 2:
        return this.pick([
          0,
          -1,
          1,
          31,
          32,
          2 ** 31,
          2 ** 53,
          -(2 ** 53),
          1.5,
          Number.MAX_VALUE,
          this.int(1e6),
        ]);
      case 3:
        return this.text();
      case 4:
        return this.hex(40);
      case 5:
        return Array.from({ length: this.int(4) }, () => this.json(depth - 1));
      default: {
        const o: Record<string, unknown> = {};
        for (let i = this.int(5); i > 0; i--)
          o[this.pick(['ref', 'repo', 'target', 'packs', 'x', this.text(6)])] = this.json(depth - 1);
        return o;
      }
    }
  }
}

/**
 * Runs `check` on `cases` generated cases; a check throws to report a broken property. Returns the
 * failures (case number and message), at most 10.
 */
export function fuzz(
  cases: number,
  seed: number,
  check: (g: Gen, i: number) => void,
): Array<{ case: number; message: string }> {
  const failures: Array<{ case: number; message: string }> = [];
  for (let i = 0; i < cases && failures.length < 10; i++) {
    // One generator per case: case i reproduces alone from (seed, i).
    const g = new Gen((seed * 1_000_003 + i) >>> 0);
    try {
      check(g, i);
    } catch (err) {
      failures.push({ case: i, message: err instanceof Error ? err.message : String(err) });
    }
  }
  return failures;
}

/** The command-line driver of one fuzz script: `--cases N --seed S`, a summary line, exit 1 on failure. */
export function main(name: string, check: (g: Gen, i: number) => void, argv = process.argv.slice(2)): void {
  const arg = (flag: string, fallback: number) => {
    const i = argv.indexOf(flag);
    return i === -1 ? fallback : Number(argv[i + 1]);
  };
  const cases = arg('--cases', 100_000);
  const seed = arg('--seed', Date.now() % 1_000_000);
  const started = Date.now();
  const failures = fuzz(cases, seed, check);
  const ms = Date.now() - started;
  for (const f of failures) process.stderr.write(`${name}: case ${f.case} (seed ${seed}): ${f.message}\n`);
  process.stdout.write(
    `${name}: ${cases} cases, seed ${seed}, ${ms} ms: ${failures.length === 0 ? 'all properties held' : `${failures.length} failures`}\n`,
  );
  process.exitCode = failures.length === 0 ? 0 : 1;
}
