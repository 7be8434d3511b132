import {
  GitError,
  isObjectId,
  isValidRefName,
  runGit as runGitUnbounded,
  type RunGitOptions,
} from 'knotless-core';
import { requestSignal } from '../net/deadline.ts';
import { Memo } from './history.ts';
import { mirrorRefs } from './ref-cache.ts';

/** A ref of a mirror. */
export interface GitRef {
  name: string;
  oid: string;
}

/** One entry of a tree. */
export interface TreeEntry {
  mode: string;
  type: 'blob' | 'tree' | 'commit';
  oid: string;
  size: number | undefined;
  name: string;
}

/** One commit as the log shows it. */
export interface CommitInfo {
  oid: string;
  parents: string[];
  author: string;
  email: string;
  date: string;
  subject: string;
  body: string;
}

/** git, killed when the request it works for runs out of time or its reader goes away. */
function runGit(args: string[], opts: RunGitOptions): ReturnType<typeof runGitUnbounded> {
  const signal = requestSignal();
  return runGitUnbounded(args, signal === undefined ? opts : { ...opts, signal });
}

async function git(dir: string, args: string[], input?: string): Promise<Buffer> {
  return (await runGit(args, { gitDir: dir, ...(input === undefined ? {} : { input }) })).stdout;
}

/** The branches and tags of a mirror (newest first), and HEAD's branch. */
export async function listRefs(
  dir: string,
): Promise<{ branches: GitRef[]; tags: GitRef[]; head: string | undefined }> {
  return mirrorRefs(dir);
}

/** The ref HEAD points at (refs/heads/…), if it is a symbolic ref. */
export async function symbolicHead(dir: string): Promise<string | undefined> {
  return (await mirrorRefs(dir)).head;
}

/** Object ids known to be commits (an id names the same object forever). */
const commits = new Set<string>();

function rememberCommit(dir: string, oid: string): void {
  if (commits.size > 100_000) commits.clear();
  commits.add(`${dir}\0${oid}`);
}

/**
 * The commit a user-given name means: a full or short object id, or a branch, tag or full ref name.
 * Anything else (options, revision syntax) is refused before git sees it.
 */
export async function resolveCommit(dir: string, name: string): Promise<string | undefined> {
  // A branch or tag: from the cached list, no git process.
  const known = (await mirrorRefs(dir)).byName.get(name);
  if (known !== undefined && (await isCommit(dir, known))) return known;
  // A full commit id seen before: no git process.
  if (commits.has(`${dir}\0${name}`)) return name;
  const candidates: string[] = [];
  if (/^[0-9a-f]{4,40}$/.test(name)) candidates.push(name);
  if (isValidRefName(name)) candidates.push(name);
  else if (isValidRefName(`refs/heads/${name}`)) candidates.push(`refs/heads/${name}`, `refs/tags/${name}`);
  for (const c of candidates) {
    const out = await runGit(['rev-parse', '--verify', '--quiet', '--end-of-options', `${c}^{commit}`], {
      gitDir: dir,
      okCodes: [1, 128],
    });
    const oid = out.stdout.toString('utf8').trim();
    if (out.code === 0 && isObjectId(oid)) {
      // A commit only a pull request's round brought may lack its parents or trees (anyone can
      // write such a round): pages would fail on it, so it is no commit here until it is whole.
      const whole = await runGit(['rev-list', '--objects', '--quiet', oid, '--not', '--all'], {
        gitDir: dir,
        okCodes: [128],
      });
      if (whole.code !== 0) return undefined;
      rememberCommit(dir, oid);
      return oid;
    }
  }
  return undefined;
}

/** Whether `oid` is a commit (a tag may point at a tree or blob); remembered once seen. */
async function isCommit(dir: string, oid: string): Promise<boolean> {
  if (commits.has(`${dir}\0${oid}`)) return true;
  const out = await runGit(['cat-file', '-t', oid], { gitDir: dir, okCodes: [128] });
  const yes = out.stdout.toString('utf8').trim() === 'commit';
  if (yes) rememberCommit(dir, oid);
  return yes;
}

/** An object named by a commit and a path in it. */
export interface ObjectAt {
  oid: string;
  type: string;
  size: number;
}

// Answers about a commit's content never change: kept per commit, path and question.
const objects = new Memo<ObjectAt | null>(4096);
const trees = new Memo<TreeEntry[]>(512);
const logs = new Memo<CommitInfo[]>(512);
/** Blobs kept in memory only up to this size (256 of them: at most 16 MiB). */
const SMALL_BLOB = 64 * 1024;
const blobs = new Memo<Buffer>(256);

/** The object at `path` in commit `oid` (type, size, id), from one `cat-file --batch-check`. */
export async function objectAt(dir: string, oid: string, path: string): Promise<ObjectAt | undefined> {
  // No tree entry holds a NUL or is named . or .. (git refuses them); git would read the first as
  // the end of the path (another file) and the others relative to a work tree a mirror has not.
  if (path.includes('\0') || path.split('/').some((s) => s === '.' || s === '..')) return undefined;
  const spec = path === '' ? `${oid}^{tree}` : `${oid}:${path}`;
  // A newline would end the batch line early: such a path is asked for as a lone argument.
  const found = await objects.through(`${dir}\0${spec}`, async () => {
    let line: string;
    if (spec.includes('\n')) {
      const ask = async (flag: string) =>
        (await runGit(['cat-file', flag, spec], { gitDir: dir, okCodes: [128] })).stdout
          .toString('utf8')
          .trim();
      const id = (
        await runGit(['rev-parse', '--verify', '--quiet', spec], { gitDir: dir, okCodes: [1, 128] })
      ).stdout
        .toString('utf8')
        .trim();
      line = `${id} ${await ask('-t')} ${await ask('-s')}`;
    } else {
      const out = await runGit(['cat-file', '--batch-check=%(objectname) %(objecttype) %(objectsize)'], {
        gitDir: dir,
        input: spec + '\n',
      });
      line = out.stdout.toString('utf8').trim();
    }
    const m = /^([0-9a-f]{40}) (\w+) (\d+)$/.exec(line);
    return m === null ? null : { oid: m[1]!, type: m[2]!, size: Number(m[3]) };
  });
  return found ?? undefined;
}

/** What is at `path` in commit `oid`: a tree, a blob, or nothing. */
export async function pathType(dir: string, oid: string, path: string): Promise<'tree' | 'blob' | undefined> {
  const o = await objectAt(dir, oid, path);
  return o?.type === 'tree' || o?.type === 'blob' ? o.type : undefined;
}

/** The entries of the tree at `path` in commit `oid`, directories first. */
export function listTree(dir: string, oid: string, path: string): Promise<TreeEntry[]> {
  return trees.through(`${dir}\0${oid}\0${path}`, () => readTree(dir, oid, path));
}

async function readTree(dir: string, oid: string, path: string): Promise<TreeEntry[]> {
  const out = await git(dir, ['ls-tree', '-z', '-l', `${oid}:${path}`]);
  const entries = out
    .toString('utf8')
    .split('\0')
    .filter(Boolean)
    .map((line): TreeEntry => {
      const tab = line.indexOf('\t');
      const [mode, type, obj, size] = line.slice(0, tab).split(/ +/);
      return {
        mode: mode!,
        type: type as TreeEntry['type'],
        oid: obj!,
        size: size === '-' ? undefined : Number(size),
        name: line.slice(tab + 1),
      };
    });
  return entries.sort((a, b) =>
    a.type === b.type ? (a.name < b.name ? -1 : 1) : a.type === 'tree' ? -1 : b.type === 'tree' ? 1 : 0,
  );
}

/** A blob's size and, when it is at most `max` bytes, its content. */
export async function readBlob(
  dir: string,
  oid: string,
  path: string,
  max: number,
): Promise<{ size: number; content: Buffer | undefined }> {
  const o = await objectAt(dir, oid, path);
  if (o === undefined || o.type !== 'blob') throw new Error(`no blob at ${path}`);
  if (o.size > max) return { size: o.size, content: undefined };
  if (o.size > SMALL_BLOB) return { size: o.size, content: await git(dir, ['cat-file', 'blob', o.oid]) };
  const content = await blobs.through(`${dir}\0${o.oid}`, () => git(dir, ['cat-file', 'blob', o.oid]));
  return { size: o.size, content };
}

const LOG_FORMAT = '%H%x00%P%x00%an%x00%ae%x00%aI%x00%s%x00%b%x1e';

function parseLog(out: Buffer): CommitInfo[] {
  return out
    .toString('utf8')
    .split('\x1e')
    .map((r) => r.replace(/^\n/, ''))
    .filter(Boolean)
    .map((r) => {
      const [oid, parents, author, email, date, subject, body] = r.split('\0');
      return {
        oid: oid!,
        parents: parents === '' || parents === undefined ? [] : parents.split(' '),
        author: author ?? '',
        email: email ?? '',
        date: date ?? '',
        subject: subject ?? '',
        body: (body ?? '').trim(),
      };
    });
}

/**
 * Commits reachable from `range` (an object id, or `base..head` of object ids), newest first; only
 * those touching `path` when given (a literal path: no pathspec magic).
 */
export async function log(
  dir: string,
  range: string,
  limit: number,
  skip = 0,
  path?: string,
): Promise<CommitInfo[]> {
  if (!/^[0-9a-f]{40}(\.\.[0-9a-f]{40})?$/.test(range)) throw new Error('log takes resolved object ids');
  const args = ['log', `--format=${LOG_FORMAT}`, `--max-count=${limit}`, `--skip=${skip}`, range, '--'];
  if (path !== undefined && path !== '') args.push(path);
  return logs.through(`${dir}\0${range}\0${limit}\0${skip}\0${path ?? ''}`, async () => {
    const out = await runGit(args, { gitDir: dir, env: { GIT_LITERAL_PATHSPECS: '1' } });
    return parseLog(out.stdout);
  });
}

/** One commit. */
export async function commitInfo(dir: string, oid: string): Promise<CommitInfo> {
  const [c] = await logs.through(`${dir}\0show\0${oid}`, async () =>
    parseLog(await git(dir, ['show', '-s', `--format=${LOG_FORMAT}`, oid])),
  );
  return c!;
}

/** The best common ancestor of two commits, if any. */
export async function mergeBase(dir: string, a: string, b: string): Promise<string | undefined> {
  const found = await bases.through(`${dir}\0${a}\0${b}`, async () => (await findBase(dir, a, b)) ?? '');
  return found === '' ? undefined : found;
}

const bases = new Memo<string>(1024);

async function findBase(dir: string, a: string, b: string): Promise<string | undefined> {
  try {
    const out = await runGit(['merge-base', a, b], { gitDir: dir, okCodes: [1] });
    const oid = out.stdout.toString('utf8').trim();
    return isObjectId(oid) ? oid : undefined;
  } catch (err) {
    if (err instanceof GitError) return undefined;
    throw err;
  }
}
