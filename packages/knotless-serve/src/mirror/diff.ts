import { collect, Memo, spawnGit } from './history.ts';

// Diffs between two commits never change: kept, the patches only when small.
const stats = new Memo<FileStat[]>(256);
const patches = new Memo<{ text: string; cut: boolean }>(64);
const SMALL_PATCH = 512 * 1024;

/** One changed file of a diff, as `git diff --numstat` counts it. */
export interface FileStat {
  path: string;
  /** The name before a rename, if it was renamed. */
  oldPath: string | undefined;
  /** Lines added and deleted; undefined for a binary file. */
  added: number | undefined;
  deleted: number | undefined;
}

/** The tree of no files: what a root commit is compared with. */
const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** Files of a diff listed at most; a diff over this many is summarised. */
export const MAX_FILES = 3000;

/** Largest patch read for one page of a diff. */
export const MAX_PATCH_BYTES = 512 * 1024;

/** The files two commits differ in, with line counts (from = undefined: a root commit). */
export function diffStat(dir: string, from: string | undefined, to: string): Promise<FileStat[]> {
  return stats.through(`${dir}\0${from ?? ''}\0${to}`, () => readStat(dir, from, to));
}

async function readStat(dir: string, from: string | undefined, to: string): Promise<FileStat[]> {
  const out = await collect(
    spawnGit(dir, ['diff', '--numstat', '-z', '-M', '--no-ext-diff', from ?? EMPTY_TREE, to, '--']),
  );
  // -z: "added\tdeleted\tpath\0", or for a rename "added\tdeleted\t\0old\0new\0".
  const parts = out.split('\0');
  const files: FileStat[] = [];
  for (let i = 0; i < parts.length && files.length < MAX_FILES; i++) {
    const m = /^(-|\d+)\t(-|\d+)\t(.*)$/s.exec(parts[i]!.replace(/^\n/, ''));
    if (m === null) continue;
    const count = (s: string) => (s === '-' ? undefined : Number(s));
    let path = m[3]!;
    let oldPath: string | undefined;
    if (path === '') {
      oldPath = parts[++i] ?? '';
      path = parts[++i] ?? '';
    }
    files.push({ path, oldPath, added: count(m[1]!), deleted: count(m[2]!) });
  }
  return files;
}

/**
 * The unified patch of some files of a diff, cut at {@link MAX_PATCH_BYTES}. Paths are given as
 * literal pathspecs (GIT_LITERAL_PATHSPECS), so a file named `:(glob)*` is only itself.
 */
export async function patchOf(
  dir: string,
  from: string | undefined,
  to: string,
  files: FileStat[],
): Promise<{ text: string; cut: boolean }> {
  if (files.length === 0) return { text: '', cut: false };
  const key = `${dir}\0${from ?? ''}\0${to}\0${files.map((f) => f.path).join('\0')}`;
  const hit = patches.get(key);
  if (hit !== undefined) return hit;
  const made = await readPatch(dir, from, to, files);
  if (made.text.length <= SMALL_PATCH) patches.set(key, made);
  return made;
}

async function readPatch(
  dir: string,
  from: string | undefined,
  to: string,
  files: FileStat[],
): Promise<{ text: string; cut: boolean }> {
  const paths = files.flatMap((f) => (f.oldPath === undefined ? [f.path] : [f.oldPath, f.path]));
  const child = spawnGit(
    dir,
    ['diff', '-M', '--no-color', '--no-ext-diff', from ?? EMPTY_TREE, to, '--', ...paths],
    { GIT_LITERAL_PATHSPECS: '1' },
  );
  let size = 0;
  const chunks: Buffer[] = [];
  let cut = false;
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      if (cut) return;
      chunks.push(c);
      size += c.length;
      if (size > MAX_PATCH_BYTES) {
        cut = true;
        child.kill('SIGKILL');
      }
    });
    child.on('error', reject);
    child.on('close', (code) =>
      cut || code === 0 ? resolve() : reject(new Error(`git diff exited with ${code}`)),
    );
  });
  return { text: Buffer.concat(chunks).subarray(0, MAX_PATCH_BYTES).toString('utf8'), cut };
}
