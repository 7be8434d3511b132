import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { indexPack, packObjectList, packObjects, parsePackInfo } from '../git/pack.ts';
import type { PackFile } from '../git/pack-file.ts';
import { GitError } from '../git/run.ts';
import { planMerge } from './geometric.ts';
import { knownObjects, rememberObjects } from './pack-objects-memo.ts';
import type { PackEntry } from '../records/ref-record.ts';

/** A fold may make the merged pack at most this many times the packs it replaces (plus the slack). */
export const FOLD_GROWTH_MAX = 2;
const FOLD_SLACK_BYTES = 4096;

/**
 * Where a fold can start: the geometric cut, but never before the last pack stored in blobs. Blob
 * packs are the big old ones: merging them would download and upload again bytes the PDS already
 * holds, so a fold touches only the inline packs at the end of the list, whose bytes the record
 * carries. Undefined when fewer than two packs would merge.
 */
export function foldStart(list: PackEntry[]): number | undefined {
  const cut = planMerge(list);
  if (cut === undefined) return undefined;
  let from = cut;
  for (let i = list.length - 1; i >= cut; i--) {
    if (list[i]!.inline === undefined) {
      from = i + 1;
      break;
    }
  }
  return list.length - from >= 2 ? from : undefined;
}

/**
 * Lays out a bare repository by hand (gitrepository-layout: `HEAD`, `refs/`, `objects/`) that borrows
 * every object of `objectsDir`. Not `git init`: the agent folds on nearly every push, and each git
 * process costs a process start; nor does a scratch repository want the user's init settings
 * (templates, a SHA-256 default). No config file: SHA-1, git's defaults.
 */
function makeScratchRepo(dir: string, objectsDir: string): void {
  fs.mkdirSync(path.join(dir, 'objects', 'pack'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'objects', 'info'));
  fs.mkdirSync(path.join(dir, 'refs'));
  fs.writeFileSync(path.join(dir, 'HEAD'), 'ref: refs/heads/main\n');
  fs.writeFileSync(path.join(dir, 'objects', 'info', 'alternates'), `${path.resolve(objectsDir)}\n`);
}

/** The repository a fold works against: its git directory, and where its objects are. */
export interface FoldRepo {
  gitDir: string;
  objectsDir: string;
  /** Where packs' objects are remembered across processes (packMemoDir); this process's only if unset. */
  memoDir?: string | undefined;
}

/**
 * Folds compaction into a write that rewrites the record anyway: when the pack list wants merging,
 * the small inline packs at its end (the new pack among them) become one pack, in the same record
 * write, so steady pushes never need a compaction of their own. `repo` holds every object those
 * packs build on (the pusher's repository, or `repo commit`'s mirror); the packs' own objects are
 * packed again, not thin. Returns the list unchanged when there is nothing to fold, when git cannot
 * index a pack against the repository (it lacks a base the pack is thin on), or when the merged
 * pack would be far bigger than the packs it replaces: the list is still valid, only longer, and a
 * separate compaction merges it past its threshold.
 *
 * Each git process costs a process start, so the packs whose objects are known (pack-objects-memo.ts:
 * those earlier pushes made or folded, kept in the cache folder for the next helper process) are not
 * indexed: when every one is known, their objects are packed straight from the repository, with no
 * scratch repository at all; should the repository lack one (another machine pushed it), or a pack
 * be thin on a spared one, every pack is indexed after all.
 */
export async function foldPacks(list: PackEntry[], repo: FoldRepo): Promise<PackEntry[]> {
  const from = foldStart(list);
  if (from === undefined) return list;
  const known = list.slice(from).map((p) => knownObjects(p.inline!, repo.memoDir));
  if (!known.every((k) => k !== undefined))
    return (await foldFrom(list, from, repo, known)) ?? (await foldFrom(list, from, repo))!;
  const wanted = new Set(known.flat());
  const file = await packObjectList(repo.gitDir, [...wanted], os.tmpdir()).catch((err: unknown) => {
    if (err instanceof GitError) return undefined;
    throw err;
  });
  if (file !== undefined) return folded(list, from, wanted, file, repo.memoDir);
  return (await foldFrom(list, from, repo))!;
}

/** The list with the packs from `from` on replaced by `file`, the pack of `wanted`, if it is a fold. */
function folded(
  list: PackEntry[],
  from: number,
  wanted: Set<string>,
  file: PackFile,
  memoDir: string | undefined,
): PackEntry[] {
  // Folded packs are small (inline ones): the merged pack is read into memory, to travel inline.
  const merged = file.bytes();
  file.close();
  const info = parsePackInfo(merged);
  // pack-objects packs exactly the objects it is given, or fails: anything else is not a fold.
  if (info.count !== wanted.size) return list;
  // Not thin, the merged pack holds in full what the packs held as deltas against older packs: a
  // small change to a big file would come back whole. Such a fold is not made; the list stays.
  const before = list.slice(from).reduce((n, p) => n + p.size, 0);
  if (merged.length > FOLD_GROWTH_MAX * before + FOLD_SLACK_BYTES) return list;
  rememberObjects(merged, [...wanted], memoDir);
  return [...list.slice(0, from), { id: info.id, size: merged.length, count: info.count, inline: merged }];
}

/**
 * The fold of `list` from `from` on, in a scratch repository borrowing the repository's objects.
 * The packs whose objects `spared` gives (by position from `from`, as foldPacks found them) are not
 * indexed, their objects read from the repository; undefined when that did not work.
 */
async function foldFrom(
  list: PackEntry[],
  from: number,
  repo: FoldRepo,
  spared: Array<readonly string[] | undefined> = [],
): Promise<PackEntry[] | undefined> {
  return inScratch(repo.objectsDir, async (scratch, env) => {
    const packs = list.slice(from);
    const learn = (p: PackEntry) => learnPack(p, scratch, env, repo.memoDir);
    // Indexed at once, on as many cores as there are; a pack thin on an earlier one of these
    // (not yet indexed then) fails, and is indexed again after the others, in list order.
    const lists = await Promise.all(packs.map(async (p, i) => spared[i] ?? (await learn(p))));
    for (const [i, p] of packs.entries()) lists[i] ??= await learn(p);
    const anySpared = spared.some((k) => k !== undefined);
    // git cannot complete a pack from objectsDir: no fold (perhaps the spared packs held it).
    if (lists.includes(undefined)) return anySpared ? undefined : list;
    const wanted = new Set(lists.flatMap((l) => l!));
    const file = await packObjectList(scratch, [...wanted], scratch, env).catch((err: unknown) => {
      // A spared pack's objects are not all in objectsDir.
      if (err instanceof GitError && anySpared) return undefined;
      throw err;
    });
    if (file === undefined) return undefined;
    return folded(list, from, wanted, file, repo.memoDir);
  });
}

/** Indexes one inline pack in the scratch repository and remembers its objects; undefined if git cannot. */
async function learnPack(
  p: PackEntry,
  scratch: string,
  env: Record<string, string>,
  memoDir: string | undefined,
): Promise<readonly string[] | undefined> {
  const indexed = await indexPack(p.inline!, scratch, false, env).catch((err: unknown) => {
    if (err instanceof GitError) return undefined;
    throw err;
  });
  if (indexed === undefined) return undefined;
  const own = await packObjects(scratch, indexed.hash, p.count);
  rememberObjects(p.inline!, own, memoDir);
  return own;
}

/** Runs `work` in a scratch repository borrowing `objectsDir`'s objects, removed after. */
async function inScratch<T>(
  objectsDir: string,
  work: (scratch: string, env: Record<string, string>) => Promise<T>,
): Promise<T> {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-fold-'));
  try {
    makeScratchRepo(scratch, objectsDir);
    // The caller's GIT_OBJECT_DIRECTORY names its own repository's objects (objectsDir): in the
    // scratch repository git must write and read its own.
    return await work(scratch, { GIT_OBJECT_DIRECTORY: path.join(scratch, 'objects') });
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
