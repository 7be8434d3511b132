import type { BlobCache } from '../cache/blob-cache.ts';
import { Meter, type Chatter } from '../text/progress.ts';
import type { XrpcClient } from '../xrpc/client.ts';
import { uploadPack } from './transfer.ts';
import { inlineBytes, type PackEntry } from '../records/ref-record.ts';
import { blobUploadLimit } from './server-info.ts';

/** A pack travels inline in the ref record when it is at most this big… */
export const INLINE_PACK_MAX = 16 * 1024;
/** …and the record's inline packs stay within this; otherwise packs go to blobs. */
export const RECORD_INLINE_MAX = 32 * 1024;
/** A push that updates more refs than this stores its pack as a blob, not a copy in every record. */
export const INLINE_REFS_MAX = 4;

/** Where and how packs are stored. */
export interface PackStore {
  writer: XrpcClient;
  cache: BlobCache;
  cacheDir: string;
  chatter: Chatter;
}

/**
 * Makes a pack list ready to write into `records` ref records: as it is, when its last (new) pack is
 * small, few records carry it and each record's inline bytes stay bounded; otherwise every inline
 * pack in it is uploaded as blobs first, so a record is only written once what it lists is stored.
 */
export async function storePacks(list: PackEntry[], records: number, store: PackStore): Promise<PackEntry[]> {
  const last = list[list.length - 1];
  const fits =
    (last?.inline === undefined || last.size <= INLINE_PACK_MAX) &&
    records <= INLINE_REFS_MAX &&
    inlineBytes(list) <= RECORD_INLINE_MAX;
  return fits ? list : hoist(list, store);
}

/** Replaces the inline packs of a list by blobs (uploaded in parts under the PDS's limit). */
async function hoist(list: PackEntry[], store: PackStore): Promise<PackEntry[]> {
  const inline = list.filter((p) => p.inline !== undefined);
  if (inline.length === 0) return list;
  const limit = await blobUploadLimit(store.writer, store.cacheDir);
  const totalParts = inline.reduce((n, p) => n + Math.ceil(p.size / limit), 0);
  const meter = new Meter(store.chatter, 'Uploading packs', totalParts);
  const stored = new Map<string, PackEntry>();
  await Promise.all(
    inline.map(async (p) => {
      const tick = () => meter.tick(Math.min(limit, p.size));
      const parts = await uploadPack(store.writer, p.inline!, limit, tick, store.cache);
      stored.set(p.id, { id: p.id, size: p.size, count: p.count, parts });
    }),
  );
  meter.end();
  return list.map((p) => stored.get(p.id) ?? p);
}
