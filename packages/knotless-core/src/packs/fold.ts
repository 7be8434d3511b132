import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { indexPack, packObjectList, packObjects, parsePackInfo } from '../git/pack.ts';
import type { PackFile } from '../git/pack-file.ts';
import { objectKinds } from '../git/objects.ts';
import { GitError } from '../git/run.ts';
import { planMerge } from './geometric.ts';
import { knownObjects, rememberObjects } from './pack-objects-memo.ts';
import type { PackEntry } from '../records/ref-record.ts';
import type { PackHolds } from '../records/ref-rules.ts';

/** A fold may make the merged pack at most this many times the packs it replaces (plus the slack). */
export const FOLD_GROWTH_MAX = 2;
const FOLD_SLACK_BYTES = 4096;

/**
 * Where a fold can start: the geometric cut, but never before the last pack stored in blobs. Blob
 * packs are the big old ones: merging them would download and upload again bytes the PDS already
 * holds, so a fold touches only the inline packs at the end of the list, whose bytes the record
 * carries. Nor before the last pack of one large blob (`holds` blob, inline when it deflates
 * small): merged, its blob would no longer be one a `blob:limit` clone can skip. Undefined when
 * fewer than two packs would merge.
 */
export function foldStart(list: PackEntry[]): number | undefined {
  const cut = planMerge(list);
  if (cut === undefined) return undefined;
  let from = cut;
  for (let i = list.length - 1; i >= cut; i--) {
    if (list[i]!.inline === undefined || list[i]!.holds?.kind === 'blob') {
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
 * the small inline packs at its end (the new packs among them) become one pack, in the same record
 * write, so steady pushes never need a compaction of their own; or, when they are packs of the
 * structure/blob split, one structure pack and one blob pack (see {@link mergedGroups}). `repo` holds
 * every object those packs build on (the pusher's repository, or `repo commit`'s mirror); the packs'
 * own objects are packed again, not thin. Returns the list unchanged when there is nothing to fold,
 * when git cannot index a pack against the repository (it lacks a base the pack is thin on), or when
 * the merged packs would be far bigger than the packs they replace: the list is still valid, only
 * longer, and a separate compaction merges it past its threshold.
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
  const merged = await mergeGroups(list.slice(from), known, { gitDir: repo.gitDir }, os.tmpdir()).catch(
    (err: unknown) => {
      if (err instanceof GitError) return undefined;
      throw err;
    },
  );
  if (merged !== undefined) return folded(list, from, merged, repo.memoDir);
  return (await foldFrom(list, from, repo))!;
}

/** Objects grouped as the packs that keep the split: the structure, then the blobs. */
export function kindGroups(kinds: { structure: string[]; blobs: string[] }): Array<{
  oids: string[];
  holds: PackHolds;
}> {
  return [
    { oids: kinds.structure, holds: { kind: 'structure' } },
    { oids: kinds.blobs, holds: { kind: 'blobs' } },
  ];
}

/**
 * The groups of objects the packs folded become: one group when none of them is a pack of the split
 * (as before it); else the structure and the blobs apart, so that the fold keeps what a partial clone
 * skips out of the structure (a merged pack held in blobs later would otherwise be downloaded whole by
 * every `blob:none` clone). A pack's `holds` says its objects' kind; only packs without it (written
 * before the split, or by a client that does not split) are typed by git, in `repo`.
 */
async function mergedGroups(
  packs: PackEntry[],
  lists: ReadonlyArray<readonly string[]>,
  repo: { gitDir: string; env?: Record<string, string> },
): Promise<Array<{ oids: string[]; holds?: PackHolds }>> {
  if (!packs.some((p) => p.holds !== undefined)) return [{ oids: [...new Set(lists.flat())] }];
  const structure = new Set<string>();
  const blobs = new Set<string>();
  const untyped: string[] = [];
  for (const [i, p] of packs.entries()) {
    if (p.holds === undefined) {
      untyped.push(...lists[i]!);
      continue;
    }
    const into = p.holds.kind === 'structure' ? structure : blobs;
    for (const oid of lists[i]!) into.add(oid);
  }
  const typed = await objectKinds(new Set(untyped), repo);
  for (const oid of typed.structure) structure.add(oid);
  for (const oid of typed.blobs) blobs.add(oid);
  return kindGroups({ structure: [...structure], blobs: [...blobs] }).filter((g) => g.oids.length > 0);
}

/** A merged pack of a fold, not yet checked: its file and the objects it was asked to hold. */
interface Merged {
  file: PackFile;
  oids: string[];
  holds?: PackHolds | undefined;
}

/**
 * Packs the objects of `packs` (their own objects `lists`, in the same order) as {@link mergedGroups}
 * groups them, each group one pack made under `tmpDir`; a git failure closes what was made and throws.
 */
async function mergeGroups(
  packs: PackEntry[],
  lists: ReadonlyArray<readonly string[]>,
  repo: { gitDir: string; env?: Record<string, string> },
  tmpDir: string,
): Promise<Merged[]> {
  const groups = await mergedGroups(packs, lists, repo);
  const out: Merged[] = [];
  try {
    for (const g of groups)
      out.push({ file: await packObjectList(repo.gitDir, g.oids, tmpDir, repo.env), ...g });
  } catch (err) {
    for (const m of out) m.file.close();
    throw err;
  }
  return out;
}

/** The list with the packs from `from` on replaced by `merged`, if it is a fold; closes the files. */
function folded(list: PackEntry[], from: number, merged: Merged[], memoDir: string | undefined): PackEntry[] {
  // Folded packs are small (inline ones): the merged packs are read into memory, to travel inline.
  const made = merged.map((m) => {
    const bytes = m.file.bytes();
    m.file.close();
    return { bytes, info: parsePackInfo(bytes), oids: m.oids, holds: m.holds };
  });
  // pack-objects packs exactly the objects it is given, or fails: anything else is not a fold.
  if (made.some((m) => m.info.count !== m.oids.length)) return list;
  // Not thin, the merged packs hold in full what the packs held as deltas against older packs: a
  // small change to a big file would come back whole. Such a fold is not made; the list stays.
  const before = list.slice(from).reduce((n, p) => n + p.size, 0);
  const after = made.reduce((n, m) => n + m.bytes.length, 0);
  if (after > FOLD_GROWTH_MAX * before + FOLD_SLACK_BYTES) return list;
  for (const m of made) rememberObjects(m.bytes, m.oids, memoDir);
  return [
    ...list.slice(0, from),
    ...made.map((m) => ({
      id: m.info.id,
      size: m.bytes.length,
      count: m.info.count,
      ...(m.holds === undefined ? {} : { holds: m.holds }),
      inline: m.bytes,
    })),
  ];
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
    const merged = await mergeGroups(packs, lists as string[][], { gitDir: scratch, env }, scratch).catch(
      (err: unknown) => {
        // A spared pack's objects are not all in objectsDir.
        if (err instanceof GitError && anySpared) return undefined;
        throw err;
      },
    );
    if (merged === undefined) return undefined;
    return folded(list, from, merged, repo.memoDir);
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
