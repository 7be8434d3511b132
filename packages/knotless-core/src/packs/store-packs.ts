import type { BlobCache } from '../cache/blob-cache.ts';
import { parsePackInfo } from '../git/pack.ts';
import { PackFile } from '../git/pack-file.ts';
import { Meter, type Chatter } from '../text/progress.ts';
import { printErr } from '../text/terminal.ts';
import type { XrpcClient } from '../xrpc/client.ts';
import { UploadBudgetWatch } from '../xrpc/rate-limit.ts';
import type { CrashPoint } from '../crash.ts';
import { uploadPack } from './transfer.ts';
import { inlineBytes, type PackEntry } from '../records/ref-record.ts';
import type { PackHolds } from '../records/ref-rules.ts';
import { blobUploadLimit } from './server-info.ts';
import type { RefSealer } from '../records/sealer.ts';

/** A pack travels inline in the ref record when it is at most this big… */
export const INLINE_PACK_MAX = 16 * 1024;

/**
 * An upload needing more blob uploads than this says how many before it starts: a PDS limits them
 * (the reference PDS about 1,000 a day from one address), so a push that spends a tenth of that at
 * once is told. The same bound for packs and for LFS objects.
 */
export const BLOB_UPLOAD_NOTICE = 100;
/** …and the record's inline packs stay within this; otherwise packs go to blobs. */
export const RECORD_INLINE_MAX = 32 * 1024;
/** A push that updates more refs than this stores its pack as a blob, not a copy in every record. */
export const INLINE_REFS_MAX = 4;

/**
 * The list entry of a pack just built: its bytes inline when small (it may travel in the record),
 * else the file itself, to be uploaded from disk. Undefined for an empty pack (which is closed).
 */
export function newPackEntry(pack: PackFile, holds?: PackHolds): PackEntry | undefined {
  const info = parsePackInfo(pack);
  if (info.count === 0) {
    pack.close();
    return undefined;
  }
  const entry = {
    id: info.id,
    size: pack.length,
    count: info.count,
    ...(holds === undefined ? {} : { holds }),
  };
  if (pack.length > INLINE_PACK_MAX) return { ...entry, local: pack };
  const inline = pack.bytes();
  pack.close();
  return { ...entry, inline };
}

/** A pack's `holds`, to carry over into the entry that replaces it (the same pack, stored otherwise). */
export function holdsOf(p: PackEntry): Pick<PackEntry, 'holds'> {
  return p.holds === undefined ? {} : { holds: p.holds };
}

/** Where and how packs are stored. */
export interface PackStore {
  writer: XrpcClient;
  cache: BlobCache;
  cacheDir: string;
  chatter: Chatter;
  /** A private repository's sealer: packs are encrypted before they leave the machine. */
  sealer?: RefSealer | undefined;
}

/**
 * Makes a pack list ready to write into `records` ref records. A pack too big to travel inline (just
 * built, on disk, or merged by a fold) is uploaded as blobs; the list's other inline packs stay inline
 * when few records carry them and each record's inline bytes stay bounded, and are uploaded too
 * otherwise. So a record is only written once what it lists is stored, and a push whose blob pack is
 * big (the structure/blob split) uploads that pack alone, its small structure pack traveling inline.
 */
export async function storePacks(list: PackEntry[], records: number, store: PackStore): Promise<PackEntry[]> {
  const big = (p: PackEntry) => p.local !== undefined || (p.inline !== undefined && p.size > INLINE_PACK_MAX);
  const keepInline =
    records <= INLINE_REFS_MAX && inlineBytes(list.filter((p) => !big(p))) <= RECORD_INLINE_MAX;
  if (keepInline && !list.some(big)) return list;
  return hoist(list, store, keepInline ? big : (p) => p.inline !== undefined || p.local !== undefined);
}

/**
 * Replaces the packs of a list that `upload` picks (inline or local ones) by blobs (uploaded in parts
 * under the PDS's limit); a local pack's file is closed once uploaded.
 */
async function hoist(
  list: PackEntry[],
  store: PackStore,
  upload: (p: PackEntry) => boolean,
): Promise<PackEntry[]> {
  const inline = list.filter(upload);
  if (inline.length === 0) return list;
  const limit = await blobUploadLimit(store.writer, store.cacheDir);
  const totalParts = inline.reduce((n, p) => n + Math.ceil(p.size / limit), 0);
  const bytes = inline.reduce((n, p) => n + p.size, 0);
  if (totalParts > BLOB_UPLOAD_NOTICE) {
    printErr(
      `knotless: ${bytes} bytes of packs need ${totalParts} blob uploads (at most ${limit} bytes each).`,
    );
  }
  // Before the first upload, from what this command's answers said so far; then as each upload's
  // answer states the PDS's budget afresh. Said once at most.
  const budget = new UploadBudgetWatch(
    `${bytes} bytes of packs`,
    () => store.writer.uploadBudget(),
    (line) => printErr(line),
  );
  budget.check(totalParts);
  let uploaded = 0;
  const meter = new Meter(store.chatter, 'Uploading packs', totalParts);
  const stored = new Map<string, PackEntry>();
  await Promise.all(
    inline.map(async (p) => {
      const tick = () => {
        meter.tick(Math.min(limit, p.size));
        budget.check(totalParts - ++uploaded);
      };
      const file = p.local ?? PackFile.fromBytes(p.inline!);
      const stored1 = await storeAsBlobs(store, file, limit, tick).finally(() => file.close());
      stored.set(p.id, { id: p.id, size: p.size, count: p.count, ...holdsOf(p), ...stored1 });
    }),
  );
  meter.end();
  return list.map((p) => stored.get(p.id) ?? p);
}

/**
 * Uploads one pack as blobs (`uploadPack`), encrypted first when `store` has a private repository's
 * sealer: the entry's `parts`, and `sealed` for an encrypted one. The caller closes `file`.
 */
export async function storeAsBlobs(
  store: { writer: XrpcClient; cache: BlobCache; sealer?: RefSealer | undefined },
  file: PackFile,
  limit: number,
  onPart: (done: number, total: number) => void,
  point?: CrashPoint,
): Promise<Pick<PackEntry, 'parts' | 'sealed'>> {
  if (store.sealer === undefined)
    return { parts: await uploadPack(store.writer, file, limit, onPart, store.cache, point) };
  const sealed = await store.sealer.sealPack(file, store.cache.tempDir);
  try {
    const parts = await uploadPack(store.writer, sealed.file, limit, onPart, store.cache, point);
    return { parts, sealed: { stored: sealed.file.length, epoch: sealed.epoch } };
  } finally {
    sealed.file.close();
  }
}
