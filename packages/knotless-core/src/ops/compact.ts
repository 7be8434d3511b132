import path from 'node:path';
import type { BlobCache } from '../cache/blob-cache.ts';
import { Mirror } from '../cache/mirror.ts';
import { crashPoint } from '../crash.ts';
import { KnotlessError } from '../errors.ts';
import { indexPack, packObjectList, packObjects, parsePackInfo, type PackInfo } from '../git/pack.ts';
import { objectKinds } from '../git/objects.ts';
import type { PackHolds } from '../records/ref-rules.ts';
import { PackFile } from '../git/pack-file.ts';
import { kindGroups } from '../packs/fold.ts';
import { planMerge } from '../packs/geometric.ts';
import { BlobGone, loadPack } from '../packs/transfer.ts';
import { readMemberTable, readRefTable, tableRefs, type TableRead } from '../records/read-refs.ts';
import type { PackEntry, RefRecord } from '../records/ref-record.ts';
import { applyRefUpdates } from '../records/ref-table.ts';
import type { RemoteRef, RemoteRepo } from '../records/remote-repo.ts';
import { writeRefTable } from '../records/table-write.ts';
import { blobUploadLimit } from '../packs/server-info.ts';
import { holdsOf, RECORD_INLINE_MAX, storeAsBlobs } from '../packs/store-packs.ts';
import type { Authorizer } from '../xrpc/client.ts';
import { swapLoop } from './swap-loop.ts';

/** Merged packs up to this size stay inline in the record. */
const INLINE_MERGED_MAX = 16 * 1024;
const MAX_ATTEMPTS = 5;

/** What compacting one ref did. */
export interface Compacted {
  ref: string;
  before: number;
  after: number;
  /** The CID the record had, and the record as now written. */
  replacedCid: string;
  written: RemoteRef;
}

/** What compaction needs besides the repository. */
export interface CompactEnv {
  auth: Authorizer;
  cache: BlobCache;
  cacheDir: string;
}

/**
 * Builds the packs that replace the list from `cut` on, and checks they hold every object of the
 * packs they replace: one pack, or, when the packs replaced were split into structure and blobs
 * (format.md, "Structure apart from blobs"), one of each kind, so that the split outlives the merge.
 */
async function mergePacks(
  remote: RemoteRepo,
  env: CompactEnv,
  list: PackEntry[],
  cut: number,
  home: RemoteRepo,
): Promise<PackEntry[]> {
  const mirror = new Mirror(env.cacheDir, home.owner.did, home.name);
  const built = await mirror.hold(async () => {
    await mirror.sync(list, (p) => loadPack(remote.reader, remote.owner.did, p, env.cache, () => {}));
    const replaced = mergedAway(list, cut);
    const wanted = [...new Set(replaced.flatMap((p) => mirror.objectsOf(p.id)))];
    const split = replaced.some((p) => p.holds !== undefined);
    const groups: Array<{ oids: string[]; holds?: PackHolds }> = split
      ? kindGroups(await objectKinds(wanted, { gitDir: mirror.gitDir }))
      : [{ oids: wanted }];
    const out: Array<{ merged: PackFile; info: PackInfo; holds?: PackHolds | undefined }> = [];
    try {
      for (const g of groups) {
        if (g.oids.length === 0) continue;
        const merged = await packObjectList(mirror.gitDir, g.oids, path.join(env.cacheDir, 'tmp'));
        const info = parsePackInfo(merged);
        out.push({ merged, info, holds: g.holds });
        const { hash } = await indexPack(merged, mirror.gitDir, false);
        const held = new Set(await packObjects(mirror.gitDir, hash, info.count));
        const lost = g.oids.filter((oid) => !held.has(oid));
        if (lost.length > 0) {
          throw new KnotlessError(
            'corrupt-remote',
            `compaction would drop ${lost.length} objects (e.g. ${lost[0]}); nothing was written.`,
          );
        }
        mirror.adoptIndexed({ id: info.id, size: merged.length, count: info.count }, hash, [...held]);
      }
      return out;
    } catch (err) {
      for (const o of out) o.merged.close();
      throw err;
    }
  });
  const entries: PackEntry[] = [];
  try {
    for (const { merged, info, holds } of built) {
      const head = {
        id: info.id,
        size: merged.length,
        count: info.count,
        ...(holds === undefined ? {} : { holds }),
      };
      if (merged.length <= INLINE_MERGED_MAX) {
        entries.push({ ...head, inline: merged.bytes() });
        continue;
      }
      const writer = remote.writer(env.auth);
      const stored = await storeAsBlobs(
        { writer, cache: env.cache, sealer: remote.sealer },
        merged,
        await blobUploadLimit(writer, env.cacheDir),
        () => {},
        'compact:blob-uploaded',
      );
      const entry: PackEntry = { ...head, ...stored };
      mirror.share(entry);
      entries.push(entry);
    }
    return entries;
  } finally {
    for (const b of built) b.merged.close();
  }
}

/**
 * The packs a merge from `cut` on replaces: all but the packs of one large blob (`holds` blob),
 * which stay as they are, so that a `blob:limit` clone still skips them (format.md, "Structure apart
 * from blobs"). They need no other pack and no other pack needs them, so they may move before the
 * merged packs.
 */
function mergedAway(list: PackEntry[], cut: number): PackEntry[] {
  return list.slice(cut).filter((p) => p.holds?.kind !== 'blob');
}

/** The packs of one large blob from `cut` on, kept by a merge from there. */
function keptLarge(list: PackEntry[], cut: number): PackEntry[] {
  return list.slice(cut).filter((p) => p.holds?.kind === 'blob');
}

/**
 * After a compaction landed: the packs it replaced leave the mirror (the merged pack holds their
 * objects) and the blob cache (the PDS frees their blobs once no record lists them), so the cache
 * keeps each object once. Another ref that still lists one of them downloads it again if it must.
 */
async function retireReplaced(home: RemoteRepo, env: CompactEnv, replaced: PackEntry[], merged: PackEntry[]) {
  const mirror = new Mirror(env.cacheDir, home.owner.did, home.name);
  await mirror.hold(() =>
    Promise.resolve(
      mirror.retire(
        replaced.map((p) => p.id),
        merged.map((m) => m.id),
      ),
    ),
  );
  for (const p of replaced) for (const part of p.parts ?? []) env.cache.drop(part.ref.$link);
}

const sameIds = (a: PackEntry[], b: PackEntry[]) =>
  a.length === b.length && a.every((p, i) => p.id === b[i]?.id);

const inlineBytes = (packs: PackEntry[]) => packs.reduce((n, p) => n + (p.inline?.length ?? 0), 0);

/**
 * Moves the largest inline packs into blobs until the record's inline bytes are within what a push
 * allows, so records stay small to list (every fetch reads every record of a repository). `hoisted`
 * remembers uploads across compare-and-swap attempts.
 */
async function hoistInline(
  remote: RemoteRepo,
  env: CompactEnv,
  packs: PackEntry[],
  hoisted: Map<string, PackEntry>,
): Promise<PackEntry[]> {
  const out = packs.map((p) => hoisted.get(p.id) ?? p);
  const largest = out
    .map((p, i) => ({ i, size: p.inline?.length ?? 0 }))
    .filter((x) => x.size > 0)
    .sort((a, b) => b.size - a.size);
  const writer = remote.writer(env.auth);
  let limit: number | undefined;
  for (const { i } of largest) {
    if (inlineBytes(out) <= RECORD_INLINE_MAX) break;
    const p = out[i]!;
    limit ??= await blobUploadLimit(writer, env.cacheDir);
    const file = PackFile.fromBytes(p.inline!);
    const stored = await storeAsBlobs(
      { writer, cache: env.cache, sealer: remote.sealer },
      file,
      limit,
      () => {},
      'compact:blob-uploaded',
    ).finally(() => file.close());
    const moved: PackEntry = { id: p.id, size: p.size, count: p.count, ...holdsOf(p), ...stored };
    hoisted.set(p.id, moved);
    out[i] = moved;
  }
  return out;
}

/**
 * Where one ref's value is read and written with compare-and-swap: its record, or the repository's
 * ref table. `write` throws SwapConflict when the value moved since `base` was read.
 */
interface RefSlot {
  read(): Promise<RemoteRef | undefined>;
  write(base: RemoteRef, record: RefRecord): Promise<RemoteRef>;
  /** The account whose packs the ref lists, where merged ones are stored: the repository's owner's, or a maintainer's. */
  store: RemoteRepo;
}

/** Compacts the ref record under `key`: see {@link compactSlot}. */
export function compactRef(remote: RemoteRepo, env: CompactEnv, key: string): Promise<Compacted | undefined> {
  return compactSlot(remote, env, {
    store: remote,
    read: () => remote.getRef(key),
    write: async (base, record) => ({
      key,
      ...(await remote.putRef(env.auth, key, record, base.cid)),
      record,
    }),
  });
}

/**
 * The table a compaction of a repository on a ref table starts from, and after each ref it wrote, the
 * table it left: compacting one ref after another reads the table once, not once per ref.
 */
export interface TableCursor {
  read: Omit<TableRead, 'signingKey'> | undefined;
  /**
   * A maintainer compacting their own table of the repository (its packs in their account), the
   * owner's table otherwise.
   */
  maintainer?: { did: string; remote: RemoteRepo; key: string };
}

/**
 * Compacts `ref` of a repository whose refs are in a ref table (see {@link compactSlot}): its new
 * pack list written into the table, one write swapped on the table read. When the table moved
 * meanwhile (a push to any ref) it is read again: a push that only appended packs to this ref is
 * kept after the merged ones, anything else is planned again, and every other ref stays as the
 * table now holds it.
 */
export function compactTableRef(
  remote: RemoteRepo,
  env: CompactEnv,
  ref: string,
  cursor: TableCursor,
): Promise<Compacted | undefined> {
  const mine = cursor.maintainer;
  const store = mine?.remote ?? remote;
  let last: TableCursor['read'];
  let first = true;
  return compactSlot(remote, env, {
    store,
    // The cursor's table first; after a conflict, the table as it is now.
    read: async () => {
      // A maintainer's table of a public repository is plain: no key ring of theirs is looked for.
      if (mine !== undefined) await store.prepare('plain');
      last =
        first && cursor.read !== undefined
          ? cursor.read
          : mine === undefined
            ? await readRefTable(remote)
            : (await readMemberTable(remote, mine.did)).read;
      first = false;
      cursor.read = last;
      return last === undefined ? undefined : tableRefs(store, last).find((r) => r.record.ref === ref);
    },
    write: async (_base, record) => {
      const read = last!;
      // The same value on fewer packs: what the entry replaced (`over`, in a repository with
      // maintainers) it still replaces, or every reader would list those values apart again.
      const over = read.table.refs.find((r) => r.ref === ref)?.over;
      const next = applyRefUpdates(
        read.table,
        [
          {
            ref,
            target: record.target!,
            packs: record.packs,
            ...(record.peeled === undefined ? {} : { peeled: record.peeled }),
            ...(over === undefined ? {} : { over }),
          },
        ],
        { repo: read.table.repo, maintainer: mine !== undefined },
        new Date(),
      );
      const { cid, rev } = await writeRefTable(store, env.auth, next, read, mine?.key);
      cursor.read = { ...read, table: next, cid, rev };
      return tableRefs(store, cursor.read).find((r) => r.record.ref === ref)!;
    },
  });
}

/**
 * Compacts one ref's pack list: merges the small recent packs so that the list stays geometric,
 * moves inline packs into blobs when the record holds more inline bytes than a push would write,
 * then rewrites the ref with compare-and-swap. When a push lands meanwhile, its packs are kept
 * after the merged one (they are thin only against what the merged pack holds). Returns undefined
 * when there was nothing to do.
 */
async function compactSlot(
  remote: RemoteRepo,
  env: CompactEnv,
  slot: RefSlot,
): Promise<Compacted | undefined> {
  /** A merge planned from `list` (the pack list read), kept while pushes only append to the list. */
  type Plan = {
    list: PackEntry[];
    cut: number | undefined;
    merged: PackEntry[] | undefined;
    kept: PackEntry[];
    /** Inline packs already moved into blobs, remembered across attempts. */
    hoisted: Map<string, PackEntry>;
  };
  type Read = { current: RemoteRef | undefined; plan?: Plan };
  type Write = { base: RemoteRef; packs: PackEntry[]; plan: Plan };
  const outcome = await swapLoop<Read, Write, Compacted | undefined, never>({
    start: { current: await slot.read() },
    maxAttempts: MAX_ATTEMPTS,
    decide: async ({ current, plan: planned }) => {
      if (current?.record.target === undefined) return { kind: 'done', value: undefined };
      let plan = planned;
      if (plan === undefined) {
        const list = current.record.packs;
        const cut = planMerge(list);
        if (cut === undefined && inlineBytes(list) <= RECORD_INLINE_MAX)
          return { kind: 'done', value: undefined };
        let merged: PackEntry[] | undefined;
        try {
          merged = cut === undefined ? undefined : await mergePacks(slot.store, env, list, cut, remote);
        } catch (err) {
          // Another compaction or a force push freed a blob of the list we read: plan from the new one.
          if (!(err instanceof BlobGone)) throw err;
          const fresh = await slot.read();
          if (fresh?.record.packs.some((p) => p.parts?.some((part) => part.ref.$link === err.cid))) throw err;
          return { kind: 'again', state: { current: fresh } };
        }
        const kept =
          merged === undefined ? list : [...list.slice(0, cut), ...keptLarge(list, cut!), ...merged];
        plan = { list, cut, merged, kept, hoisted: new Map() };
      }
      const appended = current.record.packs.slice(plan.list.length);
      const packs = await hoistInline(slot.store, env, [...plan.kept, ...appended], plan.hoisted);
      return { kind: 'write', write: { base: current, packs, plan } };
    },
    write: async ({ base, packs, plan }) => {
      const record = { ...base.record, packs, updatedAt: new Date().toISOString() };
      crashPoint('compact:before-record-write');
      const written = await slot.write(base, record);
      crashPoint('compact:after-record-write');
      if (plan.merged !== undefined && plan.cut !== undefined)
        await retireReplaced(remote, env, mergedAway(plan.list, plan.cut), plan.merged);
      return {
        ref: base.record.ref,
        before: base.record.packs.length,
        after: packs.length,
        replacedCid: base.cid,
        written,
      };
    },
    reread: async (_state, { plan }) => {
      const fresh = await slot.read();
      if (fresh === undefined) return { kind: 'done', value: undefined };
      // A push that only appended packs: keep them. Anything else: plan again from what is there.
      const appendedOnly = sameIds(fresh.record.packs.slice(0, plan.list.length), plan.list);
      return { kind: 'again', state: appendedOnly ? { current: fresh, plan } : { current: fresh } };
    },
  });
  return outcome.kind === 'done' ? outcome.value : undefined;
}
