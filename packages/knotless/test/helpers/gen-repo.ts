// Builds a realistic, reproducible git repository for round-trip tests of the remote helper. Everything
// goes through one `git fast-import` stream: thousands of `git commit` processes would take minutes.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import type { Writable } from 'node:stream';

/** What {@link generateRepo} makes; every field has a default, listed in {@link DEFAULTS}. */
export interface GenerateOptions {
  /** A bare repository; otherwise `main` is checked out in a work tree. */
  bare?: boolean;
  /** All commits, merges included. */
  commits?: number;
  /** Branches, `main` included. */
  branches?: number;
  /** Two-parent merge commits (part of `commits`). */
  merges?: number;
  lightweightTags?: number;
  annotatedTags?: number;
  /** Files of random bytes (NULs included), 1 KB to 200 KB each. */
  binaryFiles?: number;
  /** Ordinary text files in nested directories, besides the few special files every repo has. */
  fileCount?: number;
  seed?: number;
}

/** The options {@link generateRepo} uses for whatever the caller leaves out. */
export const DEFAULTS: Readonly<Required<GenerateOptions>> = {
  bare: false,
  commits: 2000,
  branches: 20,
  merges: 100,
  lightweightTags: 150,
  annotatedTags: 150,
  binaryFiles: 30,
  fileCount: 200,
  seed: 1,
};

/** A repository that generates in a fraction of a second, for quick tests. */
export const SMALL: Readonly<GenerateOptions> = {
  commits: 200,
  branches: 5,
  merges: 10,
  lightweightTags: 10,
  annotatedTags: 10,
  binaryFiles: 3,
  fileCount: 40,
};

// Listed first so that even SMALL gets the unusual names; `topic/N` fills up the rest.
const BRANCH_NAMES = [
  'main',
  'user/ünï/x',
  'weird#name',
  'release@1.0',
  'a+b',
  'feature/a-b',
  'fix/100%-done',
  'emoji/🚀',
  'deps/a,b=c;d',
  'UPPER/Mixed.Case_x',
];
const ANNOTATED_TAG_NAMES = [
  'v1.0.0',
  'v1.0.0-rc.1',
  'ünï/tag',
  'weird#tag',
  'release@2.0',
  'v2.0.0+build.7',
  'emoji-🏷',
];
const LIGHTWEIGHT_TAG_NAMES = [
  'light/ünï',
  'snap#1',
  'a+b-tag',
  // 200 UTF-8 bytes: too long for a readable record key once escaped, so the helper must hash it.
  `long/${'ü'.repeat(100)}`,
  'build@42',
];

const AUTHORS = [
  { ident: 'Ada Lovelace <ada@example.com>', tz: '+0000' },
  { ident: 'Jöhn Dœ <john@example.org>', tz: '+0100' },
  { ident: 'Grace Hopper <grace@example.net>', tz: '-0500' },
  { ident: 'Ravi Kumar <ravi@example.in>', tz: '+0530' },
];
const COMMITTER = 'Knotless Generator <generator@example.com>';
// 2020-01-01T00:00:00Z; commit i is dated within [BASE + i * STEP, BASE + (i + 1) * STEP).
const BASE_TIME = 1577836800;
const TIME_STEP = 1800;

const WORDS = (
  'alpha beta gamma delta value index count buffer stream record result error state cache ' +
  'node tree blob commit parent child token parse write read flush merge branch tag object ' +
  'length offset limit retry timeout handle session client server request response update'
).split(' ');
const VERBS = ['Fix', 'Add', 'Refactor', 'Tweak', 'Document', 'Speed up', 'Simplify', 'Rename'];
const TOP_DIRS = ['src', 'lib', 'docs', 'test', 'pkg'];
const SUB_DIRS = ['core', 'util', 'net', 'io', 'ui', 'db', 'api', 'cli'];
const EXTENSIONS = ['.ts', '.md', '.txt', '.json', '.c'];

/** Environment for git that ignores system and global config and any repository the caller is in. */
export function gitEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('GIT_')) env[k] = v;
  }
  return { ...env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: os.devNull, GIT_TERMINAL_PROMPT: '0' };
}

/** mulberry32: tiny, fast, and good enough for test data. */
class Rng {
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

/** One version of one file; shared between branches, never changed. */
interface Entry {
  readonly mode: string;
  readonly mark: number;
  /** Lines of a text file, or the bytes of a binary file or symlink target. */
  readonly content: readonly string[] | Buffer;
}

interface Branch {
  readonly name: string;
  tip: number;
  readonly files: Map<string, Entry>;
}

/** Buffers the stream and hands it to fast-import in large writes, waiting when its pipe is full. */
class Sink {
  #out: Writable;
  #exited: Promise<unknown>;
  #gone = false;
  #chunks: Buffer[] = [];
  #size = 0;

  constructor(out: Writable, exited: Promise<unknown>) {
    this.#out = out;
    this.#exited = exited;
    exited.then(
      () => (this.#gone = true),
      () => (this.#gone = true),
    );
  }

  text(s: string): void {
    this.raw(Buffer.from(s, 'utf8'));
  }

  raw(b: Buffer): void {
    this.#chunks.push(b);
    this.#size += b.length;
  }

  /** A fast-import `data` command: exact byte count, so content may hold anything. */
  data(content: string | Buffer): void {
    const b = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
    this.text(`data ${b.length}\n`);
    this.raw(b);
    this.text('\n');
  }

  async flush(force = false): Promise<void> {
    if (this.#gone) throw new Error('git fast-import quit before the end of the stream');
    if (this.#size === 0 || (!force && this.#size < 1 << 20)) return;
    const buf = Buffer.concat(this.#chunks);
    this.#chunks = [];
    this.#size = 0;
    if (!this.#out.write(buf)) {
      // A fast-import that dies never drains; its exit ends the wait instead.
      await Promise.race([once(this.#out, 'drain'), this.#exited]);
    }
  }
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runGit(args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd, env: gitEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

async function git(args: string[], cwd: string): Promise<string> {
  const r = await runGit(args, cwd);
  if (r.code !== 0) throw new Error(`git ${args.join(' ')} exited with ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** Takes `names` in order, then `fill(i)` for as many more as `count` needs. */
function names(count: number, listed: readonly string[], fill: (i: number) => string): string[] {
  return Array.from({ length: count }, (_, i) => listed[i] ?? fill(i));
}

/** The stream's content and the bookkeeping that keeps merges and ancestry real. */
class Generator {
  readonly #o: Readonly<Required<GenerateOptions>>;
  readonly #rng: Rng;
  readonly #sink: Sink;
  #nextMark = 1;
  /** Parents by commit mark; marks grow with time, so an ancestor always has the smaller mark. */
  readonly #parents = new Map<number, number[]>();
  readonly #times = new Map<number, number>();
  readonly #branches: Branch[] = [];
  readonly #textPaths: string[];
  /** Paths that commits may delete: not the special files, whose kinds must survive on `main`. */
  readonly #ordinary: Set<string>;
  readonly #binaries = new Set<string>();
  #textAdded = 0;
  #binaryAdded = 0;

  constructor(o: Readonly<Required<GenerateOptions>>, sink: Sink) {
    this.#o = o;
    this.#rng = new Rng(o.seed);
    this.#sink = sink;
    this.#textPaths = this.#makeTextPaths();
    this.#ordinary = new Set(this.#textPaths);
  }

  async run(): Promise<void> {
    const o = this.#o;
    const branchNames = names(o.branches, BRANCH_NAMES, (i) => `topic/${i}`);
    this.#sink.text('feature done\n');
    this.#root();
    let mergesLeft = o.merges;
    let created = 1;
    for (let step = 1; step < o.commits; step++) {
      // New branches appear through the first half of history, each from some existing tip.
      while (created < o.branches && step >= Math.floor((created * o.commits) / (2 * o.branches))) {
        const from = this.#rng.chance(0.5) ? this.#main() : this.#rng.pick(this.#branches);
        this.#branches.push({ name: branchNames[created]!, tip: from.tip, files: new Map(from.files) });
        created++;
      }
      const stepsLeft = o.commits - step;
      if (mergesLeft > 0 && (mergesLeft >= stepsLeft || this.#rng.chance(mergesLeft / stepsLeft))) {
        if (this.#merge(step)) {
          mergesLeft--;
          await this.#sink.flush();
          continue;
        }
      }
      this.#commit(step);
      await this.#sink.flush();
    }
    if (mergesLeft > 0) {
      throw new Error(`could place only ${o.merges - mergesLeft} of ${o.merges} merges; use more commits`);
    }
    // fast-import moved each ref with its commits, but a branch never committed on needs setting too.
    for (const b of this.#branches) this.#sink.text(`reset refs/heads/${b.name}\nfrom :${b.tip}\n\n`);
    this.#tags();
    this.#sink.text('done\n');
    await this.#sink.flush(true);
  }

  #main(): Branch {
    return this.#branches[0]!;
  }

  #makeTextPaths(): string[] {
    return Array.from({ length: this.#o.fileCount }, (_, i) => {
      const dirs = [this.#rng.pick(TOP_DIRS)];
      for (let d = this.#rng.int(0, 3); d > 0; d--) dirs.push(this.#rng.pick(SUB_DIRS));
      return `${dirs.join('/')}/file-${i}${this.#rng.pick(EXTENSIONS)}`;
    });
  }

  #binaryPath(): string {
    const p = `assets/bin-${this.#binaryAdded++}.dat`;
    this.#binaries.add(p);
    return p;
  }

  #mark(): number {
    return this.#nextMark++;
  }

  #line(): string {
    const words = Array.from({ length: this.#rng.int(3, 9) }, () => this.#rng.pick(WORDS));
    return `${' '.repeat(2 * this.#rng.int(0, 3))}${words.join(' ')} ${this.#rng.int(0, 99999)};`;
  }

  #blob(mode: string, content: readonly string[] | Buffer): Entry {
    const mark = this.#mark();
    this.#sink.text(`blob\nmark :${mark}\n`);
    this.#sink.data(Buffer.isBuffer(content) ? content : `${content.join('\n')}\n`);
    return { mode, mark, content };
  }

  #newText(): Entry {
    return this.#blob(
      '100644',
      Array.from({ length: this.#rng.int(10, 120) }, () => this.#line()),
    );
  }

  #newBinary(): Entry {
    const bytes = this.#rng.bytes(this.#rng.int(1024, 200 * 1024));
    bytes[this.#rng.int(0, bytes.length - 1)] = 0;
    return this.#blob('100644', bytes);
  }

  /** A few lines replaced, inserted or removed (never the first, which may be a shebang). */
  #editText(e: Entry): Entry {
    const lines = [...(e.content as readonly string[])];
    for (let n = this.#rng.int(1, 4); n > 0; n--) {
      const at = this.#rng.int(1, lines.length - 1);
      const r = this.#rng.next();
      if (r < 0.5) lines[at] = this.#line();
      else if (r < 0.8 || lines.length < 6) lines.splice(at, 0, this.#line());
      else lines.splice(at, 1);
    }
    return this.#blob(e.mode, lines);
  }

  #editBinary(e: Entry): Entry {
    const bytes = Buffer.from(e.content as Buffer);
    const len = this.#rng.int(1, 256);
    this.#rng.bytes(len).copy(bytes, this.#rng.int(0, Math.max(0, bytes.length - len)));
    return this.#blob(e.mode, bytes);
  }

  #root(): void {
    const files = new Map<string, Entry>();
    files.set('README.md', this.#blob('100644', ['# Generated repository', '', 'For knotless tests.']));
    files.set('docs/ünïcödé-名前.md', this.#newText());
    files.set('docs/file with spaces.txt', this.#newText());
    files.set('scripts/build.sh', this.#blob('100755', ['#!/bin/sh', 'set -e', 'echo building']));
    files.set('link-to-readme', this.#blob('120000', Buffer.from('README.md')));
    for (; this.#textAdded < Math.ceil(this.#o.fileCount / 2); this.#textAdded++) {
      files.set(this.#textPaths[this.#textAdded]!, this.#newText());
    }
    if (this.#o.binaryFiles > 0) files.set(this.#binaryPath(), this.#newBinary());
    const main: Branch = { name: 'main', tip: 0, files: new Map() };
    this.#branches.push(main);
    main.tip = this.#writeCommit(main, 0, undefined, files, [], 'Initial commit\n');
  }

  #commit(step: number): void {
    const o = this.#o;
    const b = this.#rng.chance(0.3) ? this.#main() : this.#rng.pick(this.#branches);
    const changed = new Map<string, Entry>();
    const deleted: string[] = [];
    if (this.#textAdded < o.fileCount && this.#rng.chance(0.15)) {
      changed.set(this.#textPaths[this.#textAdded++]!, this.#newText());
    }
    if (
      this.#binaryAdded < o.binaryFiles &&
      step >= Math.floor((this.#binaryAdded * o.commits) / o.binaryFiles)
    ) {
      changed.set(this.#binaryPath(), this.#newBinary());
    }
    const present = [...b.files.keys()];
    const binaries = present.filter((p) => this.#binaries.has(p));
    const texts = present.filter((p) => !this.#binaries.has(p) && b.files.get(p)!.mode !== '120000');
    if (binaries.length > 0 && this.#rng.chance(Math.min(0.5, o.binaryFiles / (2 * o.commits)))) {
      const p = this.#rng.pick(binaries);
      changed.set(p, this.#editBinary(b.files.get(p)!));
    }
    const ordinary = texts.filter((p) => this.#ordinary.has(p));
    if (ordinary.length > 10 && this.#rng.chance(0.02)) deleted.push(this.#rng.pick(ordinary));
    // One new version per path: a version replaced within the same commit would be a dangling blob.
    const edited = new Set(Array.from({ length: this.#rng.int(1, 3) }, () => this.#rng.pick(texts)));
    for (const p of edited) if (!deleted.includes(p)) changed.set(p, this.#editText(b.files.get(p)!));
    const subject = `${this.#rng.pick(VERBS)} ${this.#rng.pick(WORDS)} in ${[...changed.keys()][0] ?? 'tree'}`;
    const body = this.#rng.chance(0.3) ? `\n\n${this.#line()}\nÜnïcödé: ${this.#line()}\n` : '\n';
    b.tip = this.#writeCommit(b, step, undefined, changed, deleted, subject + body);
  }

  /** True when `a` is `b` or one of its ancestors. */
  #reaches(a: number, b: number): boolean {
    const seen = new Set<number>();
    const todo = [b];
    for (let c = todo.pop(); c !== undefined; c = todo.pop()) {
      if (c === a) return true;
      if (c < a || seen.has(c)) continue;
      seen.add(c);
      todo.push(...(this.#parents.get(c) ?? []));
    }
    return false;
  }

  /** A merge of some branch with commits another lacks into that other; false when none has any. */
  #merge(step: number): boolean {
    const rest = this.#branches.slice(1);
    for (let i = rest.length - 1; i > 0; i--) {
      const j = this.#rng.int(0, i);
      [rest[i], rest[j]] = [rest[j]!, rest[i]!];
    }
    const intos = this.#rng.chance(0.6) ? [this.#main(), ...rest] : [...rest, this.#main()];
    for (const into of intos) {
      const sources = this.#branches.filter((b) => b !== into && !this.#reaches(b.tip, into.tip));
      if (sources.length === 0) continue;
      const from = this.#rng.pick(sources);
      // Theirs wins wherever the two differ: any tree is a valid merge result, and this one is cheap.
      const changed = new Map<string, Entry>();
      for (const [p, e] of from.files) if (into.files.get(p) !== e) changed.set(p, e);
      const msg = `Merge branch '${from.name}' into ${into.name}\n`;
      into.tip = this.#writeCommit(into, step, from.tip, changed, [], msg);
      return true;
    }
    return false;
  }

  #writeCommit(
    b: Branch,
    step: number,
    other: number | undefined,
    changed: ReadonlyMap<string, Entry>,
    deleted: readonly string[],
    message: string,
  ): number {
    const mark = this.#mark();
    const time = BASE_TIME + step * TIME_STEP + this.#rng.int(0, TIME_STEP - 1);
    const author = this.#rng.pick(AUTHORS);
    const s = this.#sink;
    s.text(`commit refs/heads/${b.name}\nmark :${mark}\n`);
    s.text(`author ${author.ident} ${time - this.#rng.int(0, 7200)} ${author.tz}\n`);
    s.text(`committer ${COMMITTER} ${time} +0000\n`);
    s.data(message);
    const parents: number[] = [];
    if (b.tip !== 0) {
      s.text(`from :${b.tip}\n`);
      parents.push(b.tip);
    }
    if (other !== undefined) {
      s.text(`merge :${other}\n`);
      parents.push(other);
    }
    for (const p of deleted) {
      s.text(`D ${p}\n`);
      b.files.delete(p);
    }
    for (const [p, e] of changed) {
      s.text(`M ${e.mode} :${e.mark} ${p}\n`);
      b.files.set(p, e);
    }
    s.text('\n');
    this.#parents.set(mark, parents);
    this.#times.set(mark, time);
    return mark;
  }

  #tags(): void {
    const o = this.#o;
    const commits = [...this.#parents.keys()];
    for (const name of names(o.lightweightTags, LIGHTWEIGHT_TAG_NAMES, (i) => `build-${i}`)) {
      this.#sink.text(`reset refs/tags/${name}\nfrom :${this.#rng.pick(commits)}\n\n`);
    }
    const annotated = names(
      o.annotatedTags,
      ANNOTATED_TAG_NAMES,
      (i) => `v0.${Math.floor(i / 10)}.${i % 10}`,
    );
    for (const name of annotated) {
      const target = this.#rng.pick(commits);
      const when = this.#times.get(target)! + this.#rng.int(60, 86400);
      this.#sink.text(`tag ${name}\nfrom :${target}\ntagger ${COMMITTER} ${when} +0000\n`);
      this.#sink.data(`Release ${name}\n\n${this.#line()}\n`);
    }
  }
}

/**
 * Creates at `dir` (absent or empty) the repository `opts` describes, the same for the same options.
 */
export async function generateRepo(dir: string, opts: GenerateOptions = {}): Promise<void> {
  const o: Required<GenerateOptions> = { ...DEFAULTS, ...opts };
  if (o.commits < 1 || o.branches < 1) throw new Error('need at least one commit and one branch');
  if (o.merges > 0 && o.branches < 2) throw new Error('merges need at least two branches');
  if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0) throw new Error(`${dir} is not empty`);

  await git(['init', '-q', ...(o.bare ? ['--bare'] : []), dir], process.cwd());
  await git(['symbolic-ref', 'HEAD', 'refs/heads/main'], dir);

  // Enough active branches that fast-import never unloads a tree it will need again.
  const args = ['fast-import', '--quiet', `--active-branches=${Math.max(5, o.branches)}`];
  const child = spawn('git', args, { cwd: dir, env: gitEnv(), stdio: ['pipe', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  // A fast-import that dies mid-stream breaks the pipe, which says only that it quit; its stderr
  // says why, so that is what gets reported.
  child.stdin.on('error', () => {});
  try {
    await new Generator(o, new Sink(child.stdin, exited)).run();
  } catch (err) {
    child.kill();
    await exited.catch(() => {});
    if (stderr !== '') throw new Error(`git fast-import failed: ${stderr}`, { cause: err });
    throw err;
  }
  child.stdin.end();
  const code = await exited;
  if (code !== 0) throw new Error(`git fast-import exited with ${code}: ${stderr}`);

  if (!o.bare) await git(['reset', '--hard', '-q'], dir);
}
