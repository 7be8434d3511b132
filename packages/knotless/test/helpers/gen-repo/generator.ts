// The content of a generated repository's fast-import stream, and the bookkeeping that keeps its
// merges and ancestry real.
import type { GenerateOptions } from '../gen-repo.ts';
import { annotatedTagNames, AUTHORS, branchNames, COMMITTER, lightweightTagNames } from './names.ts';
import {
  binaryBytes,
  commitMessage,
  editLines,
  patchBytes,
  Rng,
  textLine,
  textLines,
  textPaths,
} from './random.ts';
import type { Sink } from './stream.ts';

// 2020-01-01T00:00:00Z; commit i is dated within [BASE + i * STEP, BASE + (i + 1) * STEP).
const BASE_TIME = 1577836800;
const TIME_STEP = 1800;

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

/** Writes the whole history `o` describes into a sink, from the first commit to the last tag. */
export class Generator {
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
    this.#textPaths = textPaths(this.#rng, o.fileCount);
    this.#ordinary = new Set(this.#textPaths);
  }

  async run(): Promise<void> {
    const o = this.#o;
    const names = branchNames(o.branches);
    this.#sink.text('feature done\n');
    this.#root();
    let mergesLeft = o.merges;
    let created = 1;
    for (let step = 1; step < o.commits; step++) {
      // New branches appear through the first half of history, each from some existing tip.
      while (created < o.branches && step >= Math.floor((created * o.commits) / (2 * o.branches))) {
        const from = this.#rng.chance(0.5) ? this.#main() : this.#rng.pick(this.#branches);
        this.#branches.push({ name: names[created]!, tip: from.tip, files: new Map(from.files) });
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

  #binaryPath(): string {
    const p = `assets/bin-${this.#binaryAdded++}.dat`;
    this.#binaries.add(p);
    return p;
  }

  #blob(mode: string, content: readonly string[] | Buffer): Entry {
    const mark = this.#nextMark++;
    this.#sink.text(`blob\nmark :${mark}\n`);
    this.#sink.data(Buffer.isBuffer(content) ? content : `${content.join('\n')}\n`);
    return { mode, mark, content };
  }

  #root(): void {
    const files = new Map<string, Entry>();
    files.set('README.md', this.#blob('100644', ['# Generated repository', '', 'For knotless tests.']));
    files.set('docs/ünïcödé-名前.md', this.#blob('100644', textLines(this.#rng)));
    files.set('docs/file with spaces.txt', this.#blob('100644', textLines(this.#rng)));
    files.set('scripts/build.sh', this.#blob('100755', ['#!/bin/sh', 'set -e', 'echo building']));
    files.set('link-to-readme', this.#blob('120000', Buffer.from('README.md')));
    for (; this.#textAdded < Math.ceil(this.#o.fileCount / 2); this.#textAdded++) {
      files.set(this.#textPaths[this.#textAdded]!, this.#blob('100644', textLines(this.#rng)));
    }
    if (this.#o.binaryFiles > 0) files.set(this.#binaryPath(), this.#blob('100644', binaryBytes(this.#rng)));
    const main: Branch = { name: 'main', tip: 0, files: new Map() };
    this.#branches.push(main);
    main.tip = this.#writeCommit(main, 0, undefined, files, [], 'Initial commit\n');
  }

  #commit(step: number): void {
    const o = this.#o;
    const rng = this.#rng;
    const b = rng.chance(0.3) ? this.#main() : rng.pick(this.#branches);
    const changed = new Map<string, Entry>();
    const deleted: string[] = [];
    if (this.#textAdded < o.fileCount && rng.chance(0.15)) {
      changed.set(this.#textPaths[this.#textAdded++]!, this.#blob('100644', textLines(rng)));
    }
    if (
      this.#binaryAdded < o.binaryFiles &&
      step >= Math.floor((this.#binaryAdded * o.commits) / o.binaryFiles)
    ) {
      changed.set(this.#binaryPath(), this.#blob('100644', binaryBytes(rng)));
    }
    const present = [...b.files.keys()];
    const binaries = present.filter((p) => this.#binaries.has(p));
    const texts = present.filter((p) => !this.#binaries.has(p) && b.files.get(p)!.mode !== '120000');
    if (binaries.length > 0 && rng.chance(Math.min(0.5, o.binaryFiles / (2 * o.commits)))) {
      const p = rng.pick(binaries);
      const e = b.files.get(p)!;
      changed.set(p, this.#blob(e.mode, patchBytes(rng, e.content as Buffer)));
    }
    const ordinary = texts.filter((p) => this.#ordinary.has(p));
    if (ordinary.length > 10 && rng.chance(0.02)) deleted.push(rng.pick(ordinary));
    // One new version per path: a version replaced within the same commit would be a dangling blob.
    const edited = new Set(Array.from({ length: rng.int(1, 3) }, () => rng.pick(texts)));
    for (const p of edited) {
      if (deleted.includes(p)) continue;
      const e = b.files.get(p)!;
      changed.set(p, this.#blob(e.mode, editLines(rng, e.content as readonly string[])));
    }
    const message = commitMessage(rng, [...changed.keys()][0] ?? 'tree');
    b.tip = this.#writeCommit(b, step, undefined, changed, deleted, message);
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
    const mark = this.#nextMark++;
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
    const commits = [...this.#parents.keys()];
    for (const name of lightweightTagNames(this.#o.lightweightTags)) {
      this.#sink.text(`reset refs/tags/${name}\nfrom :${this.#rng.pick(commits)}\n\n`);
    }
    for (const name of annotatedTagNames(this.#o.annotatedTags)) {
      const target = this.#rng.pick(commits);
      const when = this.#times.get(target)! + this.#rng.int(60, 86400);
      this.#sink.text(`tag ${name}\nfrom :${target}\ntagger ${COMMITTER} ${when} +0000\n`);
      this.#sink.data(`Release ${name}\n\n${textLine(this.#rng)}\n`);
    }
  }
}
