import crypto from 'node:crypto';
import fs from 'node:fs';
import type { BlobCache } from '../cache/blob-cache.ts';
import { crashPoint, type CrashPoint } from '../crash.ts';
import { DEFAULT_MAX_OBJECT_BYTES } from '../config/env.ts';
import { KnotlessError } from '../errors.ts';
import { checkPackBounds } from '../git/pack-check.ts';
import { PackFile, tempFile } from '../git/pack-file.ts';
import { XrpcError, generalFailure, type XrpcClient } from '../xrpc/client.ts';
import type { BodySource } from '../xrpc/request-body.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { CidHasher } from '../records/cid.ts';
import { readDone } from '../young-gc.ts';
import type { BlobRef, PackEntry } from '../records/ref-record.ts';

/**
 * The largest blob part a record may name: above any PDS's blob limit in use (the reference PDS's is
 * 5 MiB), so that a record cannot make a download of gigabytes look expected.
 */
export const MAX_BLOB_PART_BYTES = 100 * 1024 * 1024;

/** Pieces an upload's body is read and sent in. */
const UPLOAD_PIECE = 64 * 1024;

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

/**
 * Uploads one blob (`what` names it for a failure's sentence). Everything knotless stores as blobs
 * goes with the packs' MIME type: it is the one blob type a knotless sign-in asks to write.
 */
export async function uploadBlob(writer: XrpcClient, body: BodySource, what: string): Promise<BlobRef> {
  try {
    const res = await writer.procedure<{ blob: BlobRef }>('com.atproto.repo.uploadBlob', body, {
      contentType: PACK_MIME,
    });
    return res.blob;
  } catch (err) {
    throw generalFailure(err, what);
  }
}

/**
 * Uploads a pack as blobs of at most `partSize` bytes, in parallel; returns the refs in order. Each
 * part is read from the pack as it is sent (a file on disk for any pack worth uploading).
 */
export async function uploadPack(
  writer: XrpcClient,
  pack: PackFile,
  partSize: number,
  onPart: (done: number, total: number) => void,
  cache?: BlobCache,
  point: CrashPoint = 'push:blob-uploaded',
): Promise<BlobRef[]> {
  const parts: Array<{ at: number; length: number }> = [];
  for (let at = 0; at < pack.length; at += partSize)
    parts.push({ at, length: Math.min(partSize, pack.length - at) });
  let done = 0;
  return mapLimit(parts, 4, async (part) => {
    // Socket-sized pieces: each upload's buffer is its own, and a megabyte per part added up to tens
    // of megabytes of garbage over a large pack.
    const body: BodySource = {
      length: part.length,
      open: () => pack.chunks(part.at, part.length, UPLOAD_PIECE),
    };
    const blob = await uploadBlob(writer, body, 'uploading a pack');
    const res = { blob };
    // What we uploaded we have: cache it, so compaction and clones on this machine skip the download.
    cache?.putRange(res.blob.ref.$link, pack, part.at, part.length);
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

  /** `what` names what the blob is part of: `pack <id>`, `LFS object <oid>`. */
  constructor(what: string, cid: string, cause: unknown) {
    super(
      'corrupt-remote',
      `A blob of ${what} (${cid}) is missing from the PDS, so the repository there is incomplete; nothing was written.`,
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

/** The sentence for a pack whose bytes are not the ones its checksum names. */
function damagedPack(pack: PackEntry): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `Pack ${pack.id} from the PDS is damaged (checksum mismatch); nothing was written.`,
  );
}

/** Checks a pack's bytes against the checksum that names it, so a damaged pack never reaches git. */
export function verifyPack(pack: PackEntry, bytes: Uint8Array | PackFile): void {
  const file = bytes instanceof PackFile ? bytes : PackFile.fromBytes(bytes);
  if (file.length !== pack.size || file.length < 20) throw damagedPack(pack);
  const hash = crypto.createHash('sha1');
  const body = file.length - 20;
  const buf = Buffer.allocUnsafe(Math.min(1024 * 1024, Math.max(1, body)));
  for (let at = 0; at < body; at += buf.length)
    hash.update(file.readInto(buf.subarray(0, Math.min(buf.length, body - at)), at));
  const sum = hash.digest('hex');
  if (sum !== pack.id || file.read(body, 20).toString('hex') !== sum) throw damagedPack(pack);
}

/**
 * A pack ready for git: inline, or its blobs from the cache or the PDS. Blobs are written to disk as
 * they arrive, each checked against its CID (sha-256, computed as the bytes stream) before it is
 * cached or used; the download is cut as soon as it passes the size the record gives. The whole pack
 * is then checked against its checksum and for objects inflating past `maxObjectBytes`
 * (pack-check.ts) before git sees it, reading the files a window at a time: memory does not grow
 * with the pack. The caller closes the returned pack.
 */
export async function loadPack(
  reader: XrpcClient,
  did: string,
  pack: PackEntry,
  cache: BlobCache,
  onBytes: (n: number) => void,
  maxObjectBytes = DEFAULT_MAX_OBJECT_BYTES,
): Promise<PackFile> {
  if (pack.inline !== undefined) {
    verifyPack(pack, pack.inline);
    checkPackBounds(pack.inline, pack.id, maxObjectBytes);
    return PackFile.fromBytes(Buffer.from(pack.inline));
  }
  // The decryption's library loads while the blobs download.
  if (pack.sealed !== undefined) pack.decryptSoon?.();
  const opened: Array<{ fd: number; size: number }> = [];
  let failed = false;
  // Parts still in flight when another failed are closed as they land.
  const hold = (o: { fd: number; size: number }) => (failed ? fs.closeSync(o.fd) : opened.push(o));
  const release = () => {
    failed = true;
    for (const o of opened.splice(0)) fs.closeSync(o.fd);
  };
  try {
    const parts = await mapLimit(pack.parts ?? [], 4, async (part) => {
      const cid = part.ref.$link;
      const cached = cache.open(cid);
      if (cached !== undefined) {
        hold(cached);
        return cached;
      }
      if (part.size > MAX_BLOB_PART_BYTES || part.size < 0) {
        throw new KnotlessError(
          'corrupt-remote',
          `A blob of pack ${pack.id} claims ${part.size} bytes, over the ${MAX_BLOB_PART_BYTES} a blob may have; nothing was written.`,
        );
      }
      // A maintainer's pack is read from the account whose table listed it.
      const from = pack.holder;
      const got = await downloadBlob(
        from?.reader ?? reader,
        from?.did ?? did,
        `pack ${pack.id}`,
        cid,
        part.size,
        cache,
      );
      hold(got);
      onBytes(got.size);
      return got;
    });
    let file = PackFile.fromFds(parts);
    opened.length = 0;
    try {
      if (pack.sealed !== undefined) file = await openSealed(pack, file, cache.tempDir);
      verifyPack(pack, file);
      checkPackBounds(file, pack.id, maxObjectBytes);
    } catch (err) {
      file.close();
      throw err;
    }
    return file;
  } catch (err) {
    release();
    throw err;
  }
}

/** A sealed pack's plain bytes, in a new temporary file; closes the sealed one. */
async function openSealed(pack: PackEntry, sealed: PackFile, dir: string): Promise<PackFile> {
  try {
    if (pack.decrypt === undefined)
      throw new KnotlessError(
        'corrupt-remote',
        `Pack ${pack.id} is encrypted, but the record listing it is not a private repository's; nothing was written.`,
      );
    return await pack.decrypt(sealed, dir);
  } finally {
    sealed.close();
  }
}

/**
 * Downloads one blob into a file of the cache's, hashing it as it arrives (never whole in memory);
 * once its CID matches, the file joins the cache (unless `keep` is false: then it is deleted, and
 * only the open descriptor stays) and stays open for the caller. `what` names what the blob is part
 * of, for the sentences (`pack <id>`).
 */
export async function downloadBlob(
  reader: XrpcClient,
  did: string,
  what: string,
  cid: string,
  size: number,
  cache: BlobCache,
  keep = true,
): Promise<{ fd: number; size: number }> {
  const tmp = tempFile(cache.tempDir, 'blob');
  let hash = new CidHasher();
  let written = 0;
  let kept = false;
  try {
    try {
      // The record says how big the blob is: a longer answer is cut off as soon as it passes that.
      await reader.queryInto('com.atproto.sync.getBlob', { did, cid }, size, {
        restart: () => {
          hash = new CidHasher();
          written = 0;
          fs.ftruncateSync(tmp.fd, 0);
        },
        write: (part) => {
          hash.update(part);
          fs.writeSync(tmp.fd, part, 0, part.length, written);
          written += part.length;
          // Written away: the piece is garbage now, collected soon rather than piled up.
          readDone(part.length);
        },
      });
    } catch (err) {
      // pds-errors.ts knows the reference PDS's words for it; other servers answer 404 or a missing record.
      const kind = err instanceof XrpcError ? pdsRefusal(err) : undefined;
      if (kind === 'blob-missing' || kind === 'not-found' || kind === 'record-missing')
        throw new BlobGone(what, cid, err);
      throw generalFailure(err, `downloading ${what}`);
    }
    if (hash.cid() !== cid) {
      throw new KnotlessError(
        'corrupt-remote',
        `A blob of ${what} does not match its CID ${cid}; nothing was written.`,
      );
    }
    if (keep) cache.adopt(cid, tmp.path);
    else fs.rmSync(tmp.path, { force: true });
    kept = true;
    return { fd: tmp.fd, size: written };
  } finally {
    if (!kept) {
      fs.closeSync(tmp.fd);
      fs.rmSync(tmp.path, { force: true });
    }
  }
}
