import fs from 'node:fs';
import path from 'node:path';
import { readPackIndex } from './pack-index.ts';
import { PackFile, tempFile } from './pack-file.ts';
import { runGit } from './run.ts';

/** Identity of a pack file: its trailing checksum and object count. */
export interface PackInfo {
  id: string;
  count: number;
}

/** Reads a pack's header and trailer (format: "PACK", version, count … 20-byte SHA-1). */
export function parsePackInfo(pack: Uint8Array | PackFile): PackInfo {
  const file = pack instanceof PackFile ? pack : PackFile.fromBytes(pack);
  const head = file.read(0, 12);
  if (file.length < 32 || head.toString('latin1', 0, 4) !== 'PACK') throw new Error('not a git pack');
  return { id: file.read(file.length - 20, 20).toString('hex'), count: head.readUInt32BE(8) };
}

/**
 * Runs a pack-objects that writes a pack to stdout, into a file under `tmpDir` that is deleted at
 * once (its descriptor keeps it until the pack is closed): the pack never passes through memory, and
 * a crash leaves no file behind.
 */
async function packToFile(
  args: string[],
  input: string,
  tmpDir: string,
  gitDir?: string,
  progress = false,
  env?: Record<string, string>,
): Promise<PackFile> {
  const tmp = tempFile(tmpDir, 'pack');
  try {
    // By its name: whoever starts git (this process or the agent's spawner) opens it for git.
    await runGit(args, {
      input,
      stdoutFile: tmp.path,
      passStderr: progress,
      ...(gitDir === undefined ? {} : { gitDir }),
      ...(env === undefined ? {} : { env }),
    });
    return PackFile.fromFds([{ fd: tmp.fd, size: fs.fstatSync(tmp.fd).size }]);
  } catch (err) {
    fs.closeSync(tmp.fd);
    throw err;
  } finally {
    // Only the open descriptor is kept: nothing is left behind when this process ends.
    fs.rmSync(tmp.path, { force: true });
  }
}

/**
 * Builds a thin pack of every object reachable from `tips` and not from `exclude`, deltas allowed
 * against the excluded side (which the remote has). git's own pack-objects does the work.
 */
export async function buildPack(opts: {
  tips: string[];
  exclude: string[];
  progress: boolean;
  /** Where the pack's file is made (the cache's tmp directory). */
  tmpDir: string;
  gitDir?: string;
  /** Only the structure (commits, trees, tags): `--filter=blob:none`. */
  structure?: boolean;
}): Promise<PackFile> {
  const input = [...opts.tips, ...opts.exclude.map((oid) => `^${oid}`)].join('\n') + '\n';
  const args = [
    'pack-objects',
    '--stdout',
    '--revs',
    '--thin',
    '--delta-base-offset',
    ...(opts.structure === true ? ['--filter=blob:none'] : []),
    opts.progress ? '--progress' : '-q',
  ];
  return packToFile(args, input, opts.tmpDir, opts.gitDir, opts.progress);
}

/** A blob over this many bytes is packed on its own (format.md, "Structure apart from blobs"). */
export const LARGE_BLOB_MIN = 1024 * 1024;

/**
 * The blobs of the range {@link buildPack} packs, with their paths, and the range's edge commits
 * (rev-list's `--objects-edge`), for {@link buildBlobPack}: `lines` the blobs of at most
 * {@link LARGE_BLOB_MIN} bytes, `large` the larger ones with their sizes, each packed on its own.
 * `--filter=object:type=blob` still lists the range's commits (rev-list and pack-objects both keep
 * commits whatever the filter), so every line is typed and sized by one cat-file, and only blobs are
 * kept (a blob named by a tag or a tip has no path).
 */
export async function rangeBlobs(
  tips: string[],
  exclude: string[],
  gitDir?: string,
): Promise<{ blobs: string[]; lines: string[]; large: Array<{ oid: string; size: number }> }> {
  const input = [...tips, ...exclude.map((oid) => `^${oid}`)].join('\n') + '\n';
  const dir = gitDir === undefined ? {} : { gitDir };
  const out = await runGit(
    ['rev-list', '--objects', '--objects-edge', '--filter=object:type=blob', '--stdin'],
    {
      input,
      ...dir,
      env: { GIT_NO_REPLACE_OBJECTS: '1' },
    },
  );
  const edges: string[] = [];
  const listed: string[] = [];
  for (const l of out.stdout.toString('latin1').split('\n')) {
    if (l === '') continue;
    if (l.startsWith('-')) edges.push(l);
    else listed.push(l);
  }
  const small: string[] = [];
  const large: Array<{ oid: string; size: number }> = [];
  if (listed.length > 0) {
    // One cat-file for every line: its type (a line without a path may be a commit) and its size.
    const oids = listed.map((l) => l.split(' ', 1)[0]!);
    const types = (
      await runGit(['cat-file', '--batch-check=%(objectname) %(objecttype) %(objectsize)'], {
        input: oids.join('\n') + '\n',
        ...dir,
        env: { GIT_NO_REPLACE_OBJECTS: '1' },
      })
    ).stdout
      .toString('latin1')
      .split('\n');
    listed.forEach((line, i) => {
      const [oid, type, size] = (types[i] ?? '').split(' ');
      const named = line.includes(' ');
      // A line with a path is a blob rev-list walked to: one cat-file could not size (missing here)
      // goes to pack-objects as before, which says what is wrong.
      if (oid === undefined || oid !== oids[i] || type !== 'blob') {
        if (named) small.push(line);
        return;
      }
      const bytes = Number(size);
      if (bytes > LARGE_BLOB_MIN) large.push({ oid, size: bytes });
      else small.push(line);
    });
  }
  // pack-objects names objects by the bytes of each line; a path is passed on as rev-list gave it.
  return {
    blobs: small.map((l) => l.split(' ', 1)[0]!),
    lines: [...edges, ...small],
    large: [...new Map(large.map((b) => [b.oid, b])).values()],
  };
}

/**
 * Packs the blobs {@link rangeBlobs} listed, thin: its edge lines (`-<commit>`) make the blobs of
 * the excluded commits preferred bases, which pack-objects deltas against and leaves out, as a
 * `--thin` pack does (`--thin` itself would read revisions, and walk commits back into the pack).
 * A blob over {@link LARGE_BLOB_MIN} is no delta base (`pack.bigFileThreshold`): its pack, on its
 * own, is one a reader may skip, so no other pack may need it.
 */
export async function buildBlobPack(opts: {
  lines: string[];
  progress: boolean;
  tmpDir: string;
  gitDir?: string;
}): Promise<PackFile> {
  const args = [
    '-c',
    `pack.bigFileThreshold=${LARGE_BLOB_MIN}`,
    'pack-objects',
    '--stdout',
    '--delta-base-offset',
    opts.progress ? '--progress' : '-q',
  ];
  return packToFile(args, opts.lines.join('\n') + '\n', opts.tmpDir, opts.gitDir, opts.progress);
}

/**
 * Packs one large blob alone, whole (no delta, not thin): a reader downloads it only when it wants
 * that blob, so the pack needs no other.
 */
export async function buildLargeBlobPack(opts: {
  oid: string;
  tmpDir: string;
  gitDir?: string;
}): Promise<PackFile> {
  const args = ['pack-objects', '--stdout', '-q'];
  return packToFile(args, `${opts.oid}\n`, opts.tmpDir, opts.gitDir);
}

/**
 * The objects {@link buildPack} packs for the same `tips` and `exclude`: `rev-list --objects` walks
 * the range as `pack-objects --revs` does. Lets a caller know a pack's objects without indexing it;
 * callers hold the answer to the pack's object count before trusting it.
 */
export async function rangeObjects(
  tips: string[],
  exclude: string[],
  gitDir?: string,
  structure = false,
): Promise<string[]> {
  const input = [...tips, ...exclude.map((oid) => `^${oid}`)].join('\n') + '\n';
  const filter = structure ? ['--filter=blob:none'] : [];
  const out = await runGit(['rev-list', '--objects', ...filter, '--stdin'], {
    input,
    ...(gitDir === undefined ? {} : { gitDir }),
    // pack-objects never follows replace refs (it packs the objects themselves); rev-list would.
    env: { GIT_NO_REPLACE_OBJECTS: '1' },
  });
  // Each line is an object's name, then (for trees and blobs) a space and its path.
  return out.stdout
    .toString('latin1')
    .split('\n')
    .flatMap((l) => (l === '' ? [] : [l.split(' ', 1)[0]!]));
}

/** A pack indexed into a repository: its local name and the .keep file that protects it. */
export interface IndexedPack {
  hash: string;
  keepFile: string;
}

/**
 * Indexes a pack into the repository (`gitDirPath`), completing a thin pack with bases the
 * repository already has. The pack is kept (a .keep file) until git has updated its refs.
 */
export async function indexPack(
  pack: Uint8Array | PackFile,
  gitDirPath: string,
  progress: boolean,
  env?: Record<string, string>,
): Promise<IndexedPack> {
  const args = ['index-pack', '--stdin', '--fix-thin', '--keep=knotless', ...(progress ? ['-v'] : [])];
  // A pack on disk is streamed to git a piece at a time.
  const input = pack instanceof PackFile ? pack.chunks() : pack;
  const out = (
    await runGit(args, {
      input,
      passStderr: progress,
      gitDir: gitDirPath,
      ...(env === undefined ? {} : { env }),
    })
  ).stdout.toString('utf8');
  const hash = /^(?:keep|pack)\t([0-9a-f]+)/m.exec(out)?.[1];
  if (hash === undefined) throw new Error(`index-pack said: ${out}`);
  return { hash, keepFile: path.join(gitDirPath, 'objects', 'pack', `pack-${hash}.keep`) };
}

/**
 * The objects a pack itself carries, in pack order. After `--fix-thin` the local copy also holds
 * the bases it borrowed, appended after the original objects: taking the first `count` by offset
 * leaves exactly the pack's own.
 */
export async function packObjects(gitDirPath: string, hash: string, count: number): Promise<string[]> {
  const idx = await fs.promises.readFile(path.join(gitDirPath, 'objects', 'pack', `pack-${hash}.idx`));
  return readPackIndex(idx)
    .sort((a, b) => a.offset - b.offset)
    .slice(0, count)
    .map((o) => o.oid);
}

/** Packs exactly the given objects (not thin: deltas only among them), into a file under `tmpDir`. */
export async function packObjectList(
  gitDirPath: string,
  oids: string[],
  tmpDir: string,
  env?: Record<string, string>,
): Promise<PackFile> {
  const input = oids.join('\n') + '\n';
  const args = ['pack-objects', '--stdout', '--delta-base-offset', '-q'];
  return packToFile(args, input, tmpDir, gitDirPath, false, env);
}
