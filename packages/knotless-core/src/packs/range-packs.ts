import { buildBlobPack, buildLargeBlobPack, buildPack, rangeBlobs, rangeObjects } from '../git/pack.ts';
import type { PackFile } from '../git/pack-file.ts';
import type { PackEntry } from '../records/ref-record.ts';
import { newPackEntry } from './store-packs.ts';

/** A pack just made for a write: its list entry, and its own objects when they were listed. */
export interface MadePack {
  entry: PackEntry;
  objects: readonly string[] | undefined;
}

/**
 * Builds the packs of what is reachable from `tips` and not from `exclude`, thin against the excluded
 * side (which the remote has): with `split`, two packs (format.md, "Structure apart from blobs"), the
 * structure (commits, trees, tags) and then the blobs, so that a partial clone downloads the first
 * only, each blob over 1 MiB in a pack of its own after them (one a `blob:limit` clone skips);
 * without it, one pack that holds anything. An empty pack is left out, so a range of commits
 * alone (no new blob) is one structure pack, and a range with nothing new is none. git deltas an
 * object only against one of its own type, so neither pack needs the other's objects as bases.
 *
 * The blob pack's objects are always known (they are listed to build it); the other pack's are
 * listed beside it, as its objects' names, when `list` asks (for a caller that adopts or remembers
 * them without indexing the pack).
 */
export async function buildRangePacks(opts: {
  tips: string[];
  exclude: string[];
  gitDir: string;
  /** Where the packs' files are made (the cache's tmp directory). */
  tmpDir: string;
  progress: boolean;
  split: boolean;
  list: boolean;
}): Promise<MadePack[]> {
  const { tips, exclude, gitDir, tmpDir, progress, split } = opts;
  // Every piece ends before a failure is thrown: no git process or pack file outlives the write.
  const [structure, listed, blobs] = await Promise.allSettled([
    buildPack({ tips, exclude, progress, tmpDir, gitDir, structure: split }),
    opts.list ? rangeObjects(tips, exclude, gitDir, split) : undefined,
    split
      ? rangeBlobs(tips, exclude, gitDir).then(async (range) => {
          const pack =
            range.blobs.length === 0
              ? undefined
              : await buildBlobPack({ lines: range.lines, progress, tmpDir, gitDir });
          // One at a time: each is a pack-objects deflating a large blob, and the machine's cores are
          // the structure pack's.
          const large: Array<{ oid: string; size: number; pack: PackFile }> = [];
          try {
            for (const b of range.large)
              large.push({ ...b, pack: await buildLargeBlobPack({ oid: b.oid, tmpDir, gitDir }) });
          } catch (err) {
            pack?.close();
            for (const l of large) l.pack.close();
            throw err;
          }
          return { objects: range.blobs, pack, large };
        })
      : undefined,
  ]);
  if (structure.status === 'rejected' || listed.status === 'rejected' || blobs.status === 'rejected') {
    if (structure.status === 'fulfilled') structure.value.close();
    if (blobs.status === 'fulfilled') {
      blobs.value?.pack?.close();
      for (const l of blobs.value?.large ?? []) l.pack.close();
    }
    throw [structure, listed, blobs].find((s) => s.status === 'rejected')!.reason;
  }
  const made: MadePack[] = [];
  const first = newPackEntry(structure.value, split ? { kind: 'structure' } : undefined);
  if (first !== undefined) made.push({ entry: first, objects: listed.value });
  const second =
    blobs.value?.pack === undefined ? undefined : newPackEntry(blobs.value.pack, { kind: 'blobs' });
  if (second !== undefined) made.push({ entry: second, objects: blobs.value!.objects });
  for (const l of blobs.value?.large ?? []) {
    const entry = newPackEntry(l.pack, { kind: 'blob', oid: l.oid, blobSize: l.size });
    if (entry !== undefined) made.push({ entry, objects: [l.oid] });
  }
  return made;
}
