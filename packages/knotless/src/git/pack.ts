import path from 'node:path';
import { runGit } from './run.ts';

/** Identity of a pack file: its trailing checksum and object count. */
export interface PackInfo {
  id: string;
  count: number;
}

/** Reads a pack's header and trailer (format: "PACK", version, count … 20-byte SHA-1). */
export function parsePackInfo(pack: Uint8Array): PackInfo {
  const buf = Buffer.from(pack.buffer, pack.byteOffset, pack.byteLength);
  if (buf.length < 32 || buf.toString('latin1', 0, 4) !== 'PACK') throw new Error('not a git pack');
  return { id: buf.subarray(buf.length - 20).toString('hex'), count: buf.readUInt32BE(8) };
}

/**
 * Builds a thin pack of every object reachable from `tips` and not from `exclude`, deltas allowed
 * against the excluded side (which the remote has). git's own pack-objects does the work.
 */
export async function buildPack(opts: {
  tips: string[];
  exclude: string[];
  progress: boolean;
}): Promise<Buffer> {
  const input = [...opts.tips, ...opts.exclude.map((oid) => `^${oid}`)].join('\n') + '\n';
  const args = [
    'pack-objects',
    '--stdout',
    '--revs',
    '--thin',
    '--delta-base-offset',
    opts.progress ? '--progress' : '-q',
  ];
  return (await runGit(args, { input, passStderr: opts.progress })).stdout;
}

/**
 * Indexes a pack into the repository, completing a thin pack with bases the repository already
 * has. Returns the `.keep` file that protects the new pack until git has updated its refs.
 */
export async function indexPack(pack: Uint8Array, gitDirPath: string, progress: boolean): Promise<string> {
  const args = ['index-pack', '--stdin', '--fix-thin', '--keep=knotless fetch', ...(progress ? ['-v'] : [])];
  const out = (await runGit(args, { input: pack, passStderr: progress })).stdout.toString('utf8');
  const hash = /^(?:keep|pack)\t([0-9a-f]+)/m.exec(out)?.[1];
  if (hash === undefined) throw new Error(`index-pack said: ${out}`);
  return path.join(gitDirPath, 'objects', 'pack', `pack-${hash}.keep`);
}
