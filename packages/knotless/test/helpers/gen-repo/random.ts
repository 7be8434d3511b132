// The seeded randomness behind generated repositories, and the file contents, paths and messages made
// from it. Every value comes from one Rng in a fixed order, so changing what a helper draws (or when)
// changes every repository generated after it.

const WORDS = (
  'alpha beta gamma delta value index count buffer stream record result error state cache ' +
  'node tree blob commit parent child token parse write read flush merge branch tag object ' +
  'length offset limit retry timeout handle session client server request response update'
).split(' ');
const VERBS = ['Fix', 'Add', 'Refactor', 'Tweak', 'Document', 'Speed up', 'Simplify', 'Rename'];
const TOP_DIRS = ['src', 'lib', 'docs', 'test', 'pkg'];
const SUB_DIRS = ['core', 'util', 'net', 'io', 'ui', 'db', 'api', 'cli'];
const EXTENSIONS = ['.ts', '.md', '.txt', '.json', '.c'];

/** mulberry32: tiny, fast, and good enough for test data. */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    const item = items[Math.floor(this.next() * items.length)];
    if (item === undefined) throw new Error('pick from an empty list');
    return item;
  }

  bytes(n: number): Buffer {
    const buf = Buffer.alloc(n);
    for (let i = 0; i < n; i += 4) {
      const word = Math.floor(this.next() * 4294967296);
      for (let j = 0; j < 4 && i + j < n; j++) buf[i + j] = (word >>> (8 * j)) & 0xff;
    }
    return buf;
  }
}

/** `count` text file paths, the i-th named `file-i`, in nested directories. */
export function textPaths(rng: Rng, count: number): string[] {
  return Array.from({ length: count }, (_, i) => {
    const dirs = [rng.pick(TOP_DIRS)];
    for (let d = rng.int(0, 3); d > 0; d--) dirs.push(rng.pick(SUB_DIRS));
    return `${dirs.join('/')}/file-${i}${rng.pick(EXTENSIONS)}`;
  });
}

/** One indented, code-like line of text. */
export function textLine(rng: Rng): string {
  const words = Array.from({ length: rng.int(3, 9) }, () => rng.pick(WORDS));
  return `${' '.repeat(2 * rng.int(0, 3))}${words.join(' ')} ${rng.int(0, 99999)};`;
}

/** The lines of a new text file. */
export function textLines(rng: Rng): string[] {
  return Array.from({ length: rng.int(10, 120) }, () => textLine(rng));
}

/** `lines` with a few lines replaced, inserted or removed (never the first, which may be a shebang). */
export function editLines(rng: Rng, lines: readonly string[]): string[] {
  const edited = [...lines];
  for (let n = rng.int(1, 4); n > 0; n--) {
    const at = rng.int(1, edited.length - 1);
    const r = rng.next();
    if (r < 0.5) edited[at] = textLine(rng);
    else if (r < 0.8 || edited.length < 6) edited.splice(at, 0, textLine(rng));
    else edited.splice(at, 1);
  }
  return edited;
}

/** The content of a new binary file: 1 KB to 200 KB of random bytes, at least one of them NUL. */
export function binaryBytes(rng: Rng): Buffer {
  const bytes = rng.bytes(rng.int(1024, 200 * 1024));
  bytes[rng.int(0, bytes.length - 1)] = 0;
  return bytes;
}

/** A copy of `bytes` with one random run of up to 256 bytes overwritten. */
export function patchBytes(rng: Rng, bytes: Buffer): Buffer {
  const patched = Buffer.from(bytes);
  const len = rng.int(1, 256);
  rng.bytes(len).copy(patched, rng.int(0, Math.max(0, patched.length - len)));
  return patched;
}

/** An ordinary commit's message, its subject naming `where`; some have a body with non-ASCII text. */
export function commitMessage(rng: Rng, where: string): string {
  const subject = `${rng.pick(VERBS)} ${rng.pick(WORDS)} in ${where}`;
  const body = rng.chance(0.3) ? `\n\n${textLine(rng)}\nÜnïcödé: ${textLine(rng)}\n` : '\n';
  return subject + body;
}
