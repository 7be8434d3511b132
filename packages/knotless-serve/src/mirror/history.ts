import { spawn, type ChildProcess } from 'node:child_process';
import { requestSignal } from '../net/deadline.ts';

/** The last commit that touched an entry of a directory. */
export interface LastCommit {
  oid: string;
  author: string;
  date: string;
  subject: string;
}

/** Commits walked at most to find each entry's last commit; entries older than that show none. */
export const LAST_COMMIT_WALK = 2000;

/**
 * git with its stdout streamed, killed when the request it works for ends (time limit or reader
 * gone) or when `stop` is called. The knotless library's runGit buffers the whole answer; walks that
 * can stop early and archives that are streamed to the reader need the stream.
 */
export function spawnGit(
  dir: string,
  args: string[],
  env: Record<string, string> = {},
  signal: AbortSignal | undefined = requestSignal(),
): ChildProcess {
  return spawn('git', args, {
    env: { ...process.env, GIT_DIR: dir, GIT_NO_LAZY_FETCH: '1', GIT_TERMINAL_PROMPT: '0', ...env },
    stdio: ['ignore', 'pipe', 'ignore'],
    killSignal: 'SIGKILL',
    ...(signal === undefined ? {} : { signal }),
  });
}

/** A small cache of answers keyed by commit id: what a commit holds never changes. */
export class Memo<T> {
  #map = new Map<string, T>();
  readonly #max: number;
  constructor(max: number) {
    this.#max = max;
  }
  get(key: string): T | undefined {
    const v = this.#map.get(key);
    if (v !== undefined) {
      this.#map.delete(key);
      this.#map.set(key, v);
    }
    return v;
  }
  /** The cached answer, or `make`'s (kept unless it fails). */
  async through(key: string, make: () => Promise<T>): Promise<T> {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const v = await make();
    this.set(key, v);
    return v;
  }
  delete(key: string): void {
    this.#map.delete(key);
  }
  set(key: string, v: T): void {
    this.#map.set(key, v);
    if (this.#map.size > this.#max) this.#map.delete(this.#map.keys().next().value!);
  }
}

const lastMemo = new Memo<Map<string, LastCommit>>(256);

/**
 * The last commit touching each of `names` (entries of directory `path` at commit `oid`), from one
 * `git log --name-only` walk that stops as soon as every entry has its commit or after
 * {@link LAST_COMMIT_WALK} commits, rather than one log per entry.
 */
export async function lastCommits(
  dir: string,
  oid: string,
  path: string,
  names: string[],
): Promise<Map<string, LastCommit>> {
  const key = `${dir}\0${oid}\0${path}`;
  const cached = lastMemo.get(key);
  if (cached !== undefined) return cached;
  const found = new Map<string, LastCommit>();
  const wanted = new Set(names);
  const prefix = path === '' ? '' : `${path}/`;
  const args = ['log', '-z', '--name-only', '--no-renames', '--format=%x1e%H%x00%an%x00%aI%x00%s'];
  args.push(`--max-count=${LAST_COMMIT_WALK}`, oid, '--');
  if (path !== '') args.push(path);
  // The path is a directory's name from the repository: literal, never pathspec magic (`:(glob)…`).
  const child = spawnGit(dir, args, { GIT_LITERAL_PATHSPECS: '1' });
  let buf = '';
  let complete = false;
  const take = (record: string): void => {
    const [c, author, date, subject, ...files] = record.split('\0');
    if (c === undefined || files.length === 0) return;
    for (const f of files) {
      const name = f.replace(/^\n/, '');
      if (!name.startsWith(prefix)) continue;
      const entry = name.slice(prefix.length).split('/')[0]!;
      if (wanted.has(entry) && !found.has(entry))
        found.set(entry, { oid: c, author: author ?? '', date: date ?? '', subject: subject ?? '' });
    }
    if (found.size === wanted.size) complete = true;
  };
  await new Promise<void>((resolve, reject) => {
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      if (complete) return;
      buf += chunk;
      const records = buf.split('\x1e');
      buf = records.pop()!;
      for (const r of records) if (r !== '' && !complete) take(r);
      // Every entry placed: the rest of the history is not needed.
      if (complete) child.kill('SIGKILL');
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (!complete && buf !== '') take(buf);
      if (complete || code === 0) resolve();
      else reject(new Error(`git log exited with ${code}`));
    });
  });
  lastMemo.set(key, found);
  return found;
}

const countMemo = new Memo<number>(1024);

/** The number of commits reachable from `oid` (cached per commit: it never changes). */
export async function commitCount(dir: string, oid: string): Promise<number> {
  const key = `${dir}\0${oid}`;
  const cached = countMemo.get(key);
  if (cached !== undefined) return cached;
  const out = await collect(spawnGit(dir, ['rev-list', '--count', oid]));
  const n = Number(out.trim());
  countMemo.set(key, n);
  return n;
}

/** A child's whole stdout as text; rejects when it fails. */
export function collect(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (c: string) => (out += c));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`git exited with ${code}`))));
  });
}

/** A branch or tag with the date and subject of what it points at. */
export interface DatedRef {
  /** Full name: refs/heads/… or refs/tags/… */
  name: string;
  /** The commit (a tag is peeled). */
  oid: string;
  date: string;
  subject: string;
}

/** Commits on one side of a pair and not the other. */
export interface AheadBehind {
  ahead: number;
  behind: number;
}

const aheadMemo = new Memo<Promise<AheadBehind>>(8192);
const aheadDone = new Memo<AheadBehind>(8192);
/** One walk's own limit: it runs on after the page that asked is sent (see {@link aheadBehind}). */
const AHEAD_TIMEOUT_MS = 30_000;
/** Walks running at once across the whole appview (they compete with pages for the CPU); the rest queue. */
const AHEAD_PARALLEL = 2;
let running = 0;
const queue: (() => void)[] = [];

/** Walks waiting at most: past this a page shows "counting" rather than queue more work. */
const AHEAD_QUEUE = 500;

async function slot<T>(work: () => Promise<T>): Promise<T> {
  if (running >= AHEAD_PARALLEL) {
    if (queue.length >= AHEAD_QUEUE) throw new Error('too many ahead/behind walks waiting');
    await new Promise<void>((resolve) => queue.push(resolve));
  }
  running++;
  try {
    return await work();
  } finally {
    running--;
    queue.shift()?.();
  }
}

/** The figure for a pair if it has been counted already. */
export function aheadBehindKnown(dir: string, base: string, head: string): AheadBehind | undefined {
  return aheadDone.get(`${dir}\0${base}\0${head}`);
}

/** Whether a walk for the pair is counted or under way (a page need not wait for it again). */
export function aheadBehindStarted(dir: string, base: string, head: string): boolean {
  return aheadMemo.get(`${dir}\0${base}\0${head}`) !== undefined;
}

/**
 * Commits on `head` not on `base`, and on `base` not on `head`, cached per pair of commits. The
 * walk is not tied to the request that asked: a branches page shows what is ready within its
 * budget and the rest is there on a later view; a walk already queued or running is shared.
 */
export function aheadBehind(dir: string, base: string, head: string): Promise<AheadBehind> {
  const key = `${dir}\0${base}\0${head}`;
  const cached = aheadMemo.get(key);
  if (cached !== undefined) return cached;
  const walk = slot(() =>
    collect(
      spawnGit(
        dir,
        ['rev-list', '--left-right', '--count', `${base}...${head}`],
        {},
        AbortSignal.timeout(AHEAD_TIMEOUT_MS),
      ),
    ),
  ).then((out) => {
    const [behind, ahead] = out.trim().split(/\s+/).map(Number);
    const v = { ahead: ahead ?? 0, behind: behind ?? 0 };
    aheadDone.set(key, v);
    return v;
  });
  aheadMemo.set(key, walk);
  // Not a swallow: the caller awaits `walk` and sees its failure; this only forgets a failed walk.
  walk.catch(() => {
    if (aheadMemo.get(key) === walk) aheadMemo.delete(key);
  });
  return walk;
}
