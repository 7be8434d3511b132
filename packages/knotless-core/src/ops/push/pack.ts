import path from 'node:path';
import { crashPoint } from '../../crash.ts';
import { rangeObjects } from '../../git/pack.ts';
import { foldPacks, foldStart } from '../../packs/fold.ts';
import { packMemoDir, rememberObjects } from '../../packs/pack-objects-memo.ts';
import { buildRangePacks } from '../../packs/range-packs.ts';
import { storePacks } from '../../packs/store-packs.ts';
import { unionPacks, type PackEntry } from '../../records/ref-record.ts';
import type { RemoteRef } from '../../records/remote-repo.ts';
import type { Update } from './check.ts';
import type { PushEnv } from './job.ts';

/**
 * The refs whose packs a push builds on: the updated refs' current values and, for new refs, the
 * default branch and any ref already at the new value. Only those this repository has can be used
 * (git must walk them to leave their objects out of the pack).
 */
export function baseRefs(
  refs: Map<string, RemoteRef>,
  updates: Update[],
  present: (oid: string) => boolean,
): RemoteRef[] {
  const bases = new Map<string, RemoteRef>();
  const add = (r: RemoteRef | undefined) => {
    if (r?.record.target !== undefined && present(r.record.target)) bases.set(r.record.ref, r);
  };
  const head = refs.get('HEAD')?.record.symref;
  for (const u of updates) {
    const current = refs.get(u.dst);
    add(current);
    if (current === undefined && head !== undefined) add(refs.get(head));
  }
  const wanted = new Set(updates.flatMap((u) => [u.oid, u.peeled]));
  for (const r of refs.values()) if (wanted.has(r.record.target)) add(r);
  return [...bases.values()];
}

/**
 * A stand-in for the new pack before it is built, to tell whether a fold is likely: the size of the
 * last pack (pushes to a branch tend to be alike), at least one byte.
 */
function likeTheLast(list: PackEntry[]): PackEntry {
  return { id: '', size: Math.max(1, list.at(-1)?.size ?? 1), count: 1, inline: new Uint8Array(0) };
}

/**
 * Builds the push's thin packs (objects the remote lacks, deltas against what it has: the structure
 * and the blobs apart, or one pack with KNOTLESS_PACK_SPLIT=0) and returns the pack list every
 * updated ref will carry: the base refs' packs, then the new ones — or, when the list wants merging,
 * the small packs at its end and the new ones folded together (fold.ts).
 * Large packs, and inline packs that would overfill a record, are uploaded as blobs first — so a
 * record is only ever written once everything it lists is stored. The base packs come from `refs`:
 * the true listing git decided on (or the agent's current view), or a re-listing after the PDS said
 * a blob they name is gone.
 */
export async function preparePacks(
  env: PushEnv,
  updates: Update[],
  present: (oid: string) => boolean,
  refs: Map<string, RemoteRef>,
): Promise<PackEntry[]> {
  const bases = baseRefs(refs, updates, present);
  const tips = [...new Set(updates.map((u) => u.oid).filter((o): o is string => o !== undefined))];
  let list = unionPacks(bases.map((b) => b.record.packs));
  if (tips.length === 0) return list;
  const exclude = bases.map((b) => b.record.target!);
  // Every tip already a base's (a new branch at a pushed commit): nothing is new, no pack to build.
  if (tips.every((tip) => exclude.includes(tip))) return list;
  // A fold packs again the objects of the inline packs it merges, and lists what each holds: a
  // pack's objects remembered (pack-objects-memo.ts) spare it an index-pack of that pack. So the new
  // pack's objects are listed (rev-list over the pushed range) whenever it is inline: while git builds
  // it when it is likely to be (a fold is likely, or the last pack is inline too), else after.
  const guess = env.fold ? foldStart([...list, likeTheLast(list)]) : undefined;
  const early = env.fold && (guess !== undefined || list.at(-1)?.inline !== undefined);
  const tmpDir = path.join(env.cacheDir, 'tmp');
  const progress = env.chatter.progress && env.chatter.verbosity > 0;
  const memoDir = packMemoDir(env.cacheDir);
  const made = await buildRangePacks({
    tips,
    exclude,
    progress,
    tmpDir,
    gitDir: env.gitDir,
    split: env.split,
    list: early,
  });
  crashPoint('push:pack-built');
  for (const { entry, objects } of made) {
    list.push(entry);
    if (env.fold && entry.inline !== undefined) {
      const listed = objects ?? (await rangeObjects(tips, exclude, env.gitDir, entry.holds !== undefined));
      // Held to the pack's count: should the two ever disagree, a fold indexes the pack.
      if (listed.length === entry.count) rememberObjects(entry.inline, listed, memoDir);
    }
  }
  // Each pack once: a new pack can be byte for byte one the bases list already (a new branch whose
  // commit brings back a blob an earlier push packed alone), and a ref table's entry that lists a
  // pack twice breaks a rule every reader enforces.
  list = unionPacks([list]);
  // The records are rewritten anyway: merge the small packs at the end of the list in the same write.
  if (env.fold && foldStart(list) !== undefined) {
    const objectsDir = await env.objectsDir();
    const folded = await foldPacks(list, { gitDir: env.gitDir, objectsDir, memoDir });
    if (folded !== list) crashPoint('push:packs-folded');
    list = folded;
  }

  return storePacks(list, updates.length, {
    // A maintainer's packs go to their own account, the one their table is in.
    writer: (env.packsTo ?? env.remote).writer(env.auth),
    cache: env.cache,
    cacheDir: env.cacheDir,
    chatter: env.chatter,
    sealer: env.remote.sealer,
  });
}
