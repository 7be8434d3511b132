import crypto from 'node:crypto';
import type { BlobCache } from '../cache/blob-cache.ts';
import { crashPoint, type CrashPoint } from '../crash.ts';
import { DEFAULT_MAX_OBJECT_BYTES } from '../config/env.ts';
import { KnotlessError } from '../errors.ts';
import { checkPackBounds } from '../git/pack-check.ts';
import { XrpcError, generalFailure, type XrpcClient } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { blobMatchesCid } from './cid.ts';
import type { BlobRef, PackEntry } from '../records/ref-record.ts';

/**
 * The largest blob part a record may name: above any PDS's blob limit in use (the reference PDS's is
 * 5 MiB), so that a record cannot make a download of gigabytes look expected.
 */
export const MAX_BLOB_PART_BYTES = 100 * 1024 * 1024;

/** The MIME type packs are uploaded with. */
const PACK_MIME = 'application/x-git-packed-objects';

/** Runs `fn` over `items` with at most `limit` in flight, keeping the results in order. */
export async function mapLimit<T, R>(
  items: T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** Uploads a pack as blobs of at most `partSize` bytes, in parallel; returns the refs in order. */
export async function uploadPack(
  writer: XrpcClient,
  pack: Uint8Array,
  partSize: number,
  onPart: (done: number, total: number) => void,
  cache?: BlobCache,
  point: CrashPoint = 'push:blob-uploaded',
): Promise<BlobRef[]> {
  const parts: Uint8Array[] = [];
  for (let off = 0; off < pack.length; off += partSize) parts.push(pack.subarray(off, off + partSize));
  let done = 0;
  return mapLimit(parts, 4, async (part) => {
    let res: { blob: BlobRef };
    try {
      res = await writer.procedure<{ blob: BlobRef }>('com.atproto.repo.uploadBlob', part, {
        contentType: PACK_MIME,
      });
    } catch (err) {
      throw generalFailure(err, 'uploading a pack');
    }
    // What we uploaded we have: cache it, so compaction and clones on this machine skip the download.
    cache?.put(res.blob.ref.$link, part);
    crashPoint(point);
    onPart(++done, parts.length);
    return res.blob;
  });
}

/**
 * A blob a record listed is not on the PDS. Usually the record changed while it was read (a
 * compaction or a force push replaced the pack and the PDS freed its blobs), so readers list again
 * and retry (see {@link withRelist}); when the record still lists the blob, the remote is damaged,
 * which is what the message says.
 */
export class BlobGone extends KnotlessError {
  override name = 'BlobGone';
  readonly cid: string;

  constructor(pack: string, cid: string, cause: unknown) {
    super(
      'corrupt-remote',
      `A blob of pack ${pack} (${cid}) is missing from the PDS, so the repository there is incomplete; nothing was written.`,
      { cause },
    );
    this.cid = cid;
  }
}

/** How many times a reader lists again after a blob vanished before giving up. */
export const MAX_RELISTS = 2;

/** The sentence for a reader whose wanted objects went away while it read. */
export function remoteChanged(label: string): KnotlessError {
  return new KnotlessError(
    'remote-changed',
    `${label} changed while fetching (a push or compaction replaced its packs); fetch again.`,
  );
}

/**
 * Runs `read` over a pack list, and when one of its blobs has vanished lists again with `relist`
 * and runs `read` over the new list, at most MAX_RELISTS times. A compaction or force push that
 * lands while a reader downloads frees the blobs of the packs it replaced; the new record lists
 * packs holding the same objects (or, after a force push, says the ref moved). `relist` answers
 * undefined when what the reader wants is no longer there. A blob the new list still names is
 * really missing: that failure is thrown as is.
 */
export async function withRelist<T>(
  list: PackEntry[],
  relist: () => Promise<PackEntry[] | undefined>,
  read: (list: PackEntry[], relisted: boolean) => Promise<T>,
  label: string,
): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      return await read(list, n > 0);
    } catch (err) {
      if (!(err instanceof BlobGone)) throw err;
      if (n === MAX_RELISTS) throw remoteChanged(label);
      const fresh = await relist();
      if (fresh === undefined) throw remoteChanged(label);
      if (fresh.some((p) => p.parts?.some((part) => part.ref.$link === err.cid))) throw err;
      list = fresh;
    }
  }
}

/** Checks a pack's bytes against the checksum that names it, so a damaged pack never reaches git. */
export function verifyPack(pack: PackEntry, bytes: Uint8Array): void {
  const body = bytes.subarray(0, bytes.length - 20);
  const sum = crypto.createHash('sha1').update(body).digest('hex');
  if (
    bytes.length !== pack.size ||
    sum !== pack.id ||
    Buffer.from(bytes.subarray(bytes.length - 20)).toString('hex') !== sum
  ) {
    throw new KnotlessError(
      'corrupt-remote',
      `Pack ${pack.id} from the PDS is damaged (checksum mismatch); nothing was written.`,
    );
  }
}

/**
 * The bytes of a pack: inline, or its blobs from the cache or the PDS. Every downloaded blob is
 * checked against its CID (sha-256) before it is cached or used, and the whole pack against its
 * checksum and for objects inflating past `maxObjectBytes` (pack-check.ts) before git sees it.
 */
export async function loadPack(
  reader: XrpcClient,
  did: string,
  pack: PackEntry,
  cache: BlobCache,
  onBytes: (n: number) => void,
  maxObjectBytes = DEFAULT_MAX_OBJECT_BYTES,
): Promise<Buffer> {
  if (pack.inline !== undefined) {
    verifyPack(pack, pack.inline);
    checkPackBounds(pack.inline, pack.id, maxObjectBytes);
    return Buffer.from(pack.inline);
  }
  const parts = await mapLimit(pack.parts ?? [], 4, async (part) => {
    const cid = part.ref.$link;
    const cached = cache.get(cid);
    if (cached !== undefined) return cached;
    if (part.size > MAX_BLOB_PART_BYTES || part.size < 0) {
      throw new KnotlessError(
        'corrupt-remote',
        `A blob of pack ${pack.id} claims ${part.size} bytes, over the ${MAX_BLOB_PART_BYTES} a blob may have; nothing was written.`,
      );
    }
    let bytes: Buffer;
    try {
      // The record says how big the blob is: a longer answer is cut off as soon as it passes that.
      bytes = await reader.queryBytes('com.atproto.sync.getBlob', { did, cid }, part.size);
    } catch (err) {
      // pds-errors.ts knows the reference PDS's words for it; other servers answer 404 or a missing record.
      const kind = err instanceof XrpcError ? pdsRefusal(err) : undefined;
      if (kind === 'blob-missing' || kind === 'not-found' || kind === 'record-missing')
        throw new BlobGone(pack.id, cid, err);
      throw generalFailure(err, `downloading pack ${pack.id}`);
    }
    if (!blobMatchesCid(bytes, cid)) {
      throw new KnotlessError(
        'corrupt-remote',
        `A blob of pack ${pack.id} does not match its CID ${cid}; nothing was written.`,
      );
    }
    cache.put(cid, bytes);
    onBytes(bytes.length);
    return bytes;
  });
  const bytes = Buffer.concat(parts);
  verifyPack(pack, bytes);
  checkPackBounds(bytes, pack.id, maxObjectBytes);
  return bytes;
}
