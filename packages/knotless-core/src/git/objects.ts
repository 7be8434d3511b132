import fs from 'node:fs';
import path from 'node:path';
import { callerEnv, currentCaller } from '../caller/scope.ts';
import { gitRepoEnv } from '../config/env.ts';
import { gitText, runGit } from './run.ts';

/** What a local name or id resolves to. */
export interface LocalObject {
  oid: string;
  type: string;
  /** For an annotated tag, the object it finally points at. */
  peeled: string;
}

/** Which repository: `gitDir`, or the one git's environment names (the current one) when absent. */
export interface InRepo {
  gitDir?: string;
}

/**
 * Names or ids resolved (names that resolve to nothing are left out), and which of `oids` this
 * repository holds ({@link presentObjects}), in one `git cat-file` run: a push asks both before it
 * decides anything, and every git process costs a process start.
 */
export async function lookUpObjects(
  specs: string[],
  oids: Iterable<string>,
  repo: InRepo = {},
): Promise<{ found: Map<string, LocalObject>; present: Set<string> }> {
  const found = new Map<string, LocalObject>();
  const present = new Set<string>();
  const ids = [...new Set(oids)];
  if (specs.length === 0 && ids.length === 0) return { found, present };
  const input = specs.map((s) => `${s}\n${s}^{}\n`).join('') + ids.map((id) => `${id}\n`).join('');
  const lines = (
    await gitText(['cat-file', '--batch-check=%(objectname) %(objecttype)'], { ...repo, input })
  ).split('\n');
  specs.forEach((spec, i) => {
    const [oid, type] = (lines[2 * i] ?? '').split(' ');
    const [peeled] = (lines[2 * i + 1] ?? '').split(' ');
    if (oid === undefined || type === undefined || type === 'missing' || lines[2 * i]!.endsWith(' missing'))
      return;
    found.set(spec, {
      oid,
      type,
      peeled: peeled !== undefined && !lines[2 * i + 1]!.endsWith('missing') ? peeled : oid,
    });
  });
  ids.forEach((id, i) => {
    // A present object's line is `<id> <type>`; otherwise `<what was asked> missing` (or ambiguous).
    const [oid, type] = (lines[2 * specs.length + i] ?? '').split(' ');
    if (oid === id && type !== undefined && type !== 'missing' && type !== 'ambiguous') present.add(id);
  });
  return { found, present };
}

/** The subset of ids whose objects this repository has. */
export async function presentObjects(oids: Iterable<string>, repo: InRepo = {}): Promise<Set<string>> {
  return (await lookUpObjects([], oids, repo)).present;
}

/** True when `ancestor` is reachable from `descendant` (both must exist locally). */
export async function isAncestor(ancestor: string, descendant: string, repo: InRepo = {}): Promise<boolean> {
  if (ancestor === descendant) return true;
  const { code } = await runGit(['merge-base', '--is-ancestor', ancestor, descendant], {
    ...repo,
    okCodes: [1],
  });
  return code === 0;
}

/**
 * The repository's git directory: GIT_DIR, which git sets for every remote helper to the repository
 * it resolved (relative to the directory it runs the helper in), or, when absent (a helper run by
 * hand), git's own answer. Every git process costs a process start.
 */
export async function gitDir(): Promise<string> {
  const set = gitRepoEnv(callerEnv()).gitDir;
  if (set !== undefined) return path.resolve(callerDir(), set);
  return (await gitText(['rev-parse', '--absolute-git-dir'])).trim();
}

/** The directory git runs in for this work: the caller's (caller/scope.ts), else ours. */
function callerDir(): string {
  return currentCaller()?.cwd ?? process.cwd();
}

/**
 * The repository a push is made from ({@link gitDir}), and its object directory, worked out when a
 * push needs it (a fold) as git does (gitrepository-layout): GIT_OBJECT_DIRECTORY, else the common
 * directory's `objects` (GIT_COMMON_DIR, else the one a linked worktree's `commondir` file names,
 * else the git directory itself). Read here rather than asked of `git rev-parse --git-path objects`:
 * every git process costs a process start.
 */
export async function pushedFrom(): Promise<{ gitDir: string; objectsDir: () => Promise<string> }> {
  const dir = await gitDir();
  const cwd = callerDir();
  const { objectDirectory, commonDir } = gitRepoEnv(callerEnv());
  const objectsDir = async () => {
    if (objectDirectory !== undefined) return path.resolve(cwd, objectDirectory);
    if (commonDir !== undefined) return path.resolve(cwd, commonDir, 'objects');
    const named = await fs.promises.readFile(path.join(dir, 'commondir'), 'utf8').catch((err: unknown) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    });
    // The file names a directory relative to the git directory; git drops the line's ends.
    return path.resolve(dir, named === undefined ? '.' : named.replace(/[\r\n]+$/, ''), 'objects');
  };
  return { gitDir: dir, objectsDir };
}

/**
 * Objects sorted into the two kinds of the structure/blob split (format.md, "Structure apart from
 * blobs"): blobs, and everything else (commits, trees, tags). One `git cat-file` run; an object the
 * repository lacks counts as structure, so that packing it fails rather than hiding it in a blob pack.
 */
export async function objectKinds(
  oids: Iterable<string>,
  repo: InRepo & { env?: Record<string, string> },
): Promise<{ structure: string[]; blobs: string[] }> {
  const structure: string[] = [];
  const blobs: string[] = [];
  const ids = [...oids];
  if (ids.length === 0) return { structure, blobs };
  const out = await runGit(['cat-file', '--batch-check=%(objectname) %(objecttype)'], {
    ...repo,
    input: ids.join('\n') + '\n',
  });
  for (const line of out.stdout.toString('latin1').split('\n')) {
    const [oid, type] = line.split(' ');
    if (oid === undefined || type === undefined) continue;
    (type === 'blob' ? blobs : structure).push(oid);
  }
  return { structure, blobs };
}
