// The rules every record that names packs shares (dev.knotless.ref, dev.knotless.refs and its parts):
// one place, so that a ref table never accepts a pack or a ref name a ref record would refuse.
import type { PackFile } from '../git/pack-file.ts';
import { isObjectId, isValidRefName } from '../git/refname.ts';
import { hasUnsafe } from '../text/terminal.ts';
import type { XrpcClient } from '../xrpc/client.ts';

/** A blob reference exactly as uploadBlob returned it; the PDS counts only these as references. */
export interface BlobRef {
  $type: 'blob';
  ref: { $link: string };
  mimeType: string;
  size: number;
}

/** One git pack: inline bytes, or blobs that concatenated in order are the pack file. */
export interface PackEntry {
  /** The pack's trailing SHA-1 checksum, hex: its identity. */
  id: string;
  size: number;
  /** Number of objects in the pack. */
  count: number;
  inline?: Uint8Array;
  parts?: BlobRef[];
  /**
   * A pack just built here and too big to travel inline, on disk until it is uploaded as blobs
   * (store-packs.ts); never written into a record.
   */
  local?: PackFile;
  /**
   * A private repository's pack (sealed records only): its blobs are the pack encrypted, `stored`
   * bytes long, under the key of `epoch` (private/sealer.ts).
   */
  sealed?: { stored: number; epoch: number };
  /**
   * What the pack holds (format.md, "Structure apart from blobs"): `structure` (commits, trees,
   * tags), `blobs` (blobs of at most 1 MiB) or `blob` (one larger blob, `oid`, `blobSize` bytes).
   * Undefined for a pack that may hold anything, as every pack written before the split does.
   */
  holds?: PackHolds;
  /**
   * The account whose PDS holds the pack's blobs, when it is not the repository owner's: a
   * maintainer's packs are blobs in the maintainer's own account (format.md, "Teams"). Set by the
   * reader that found the pack in that account's table; never written into a record.
   */
  holder?: { did: string; reader: XrpcClient };
  /** Decrypts a sealed pack's blobs into a new temporary file under `dir`; set when its record was opened. */
  decrypt?: (file: PackFile, dir: string) => Promise<PackFile>;
  /** Starts loading what `decrypt` needs, without waiting: called as the blobs start to download. */
  decryptSoon?: () => void;
}

/** What a pack of the split holds; `blob` names its one blob. */
export type PackHolds =
  { kind: 'structure' } | { kind: 'blobs' } | { kind: 'blob'; oid: string; blobSize: number };

/** Most packs one ref may list (the lexicon's limit), and most blobs one pack may be split into. */
export const MAX_PACKS = 1000;
export const MAX_PARTS = 1000;
/** The smallest pack there is: a 12-byte header and a 20-byte checksum. */
const MIN_PACK = 32;

/** Builds the error for a record that breaks a rule; `what` says which rule, in a few words. */
export type Fail = (what: string) => Error;

/**
 * A ref name a record may hold: valid for git (`git check-ref-format`) and free of anything a
 * terminal would act on (git prints ref names as they are, where we cannot escape them).
 */
export function isSafeRefName(ref: unknown): ref is string {
  return typeof ref === 'string' && isValidRefName(ref) && !hasUnsafe(ref);
}

export function parseBlobRef(v: unknown, corrupt: Fail): BlobRef {
  const b = v as Partial<BlobRef> | null;
  if (
    typeof b !== 'object' ||
    b === null ||
    b.$type !== 'blob' ||
    typeof b.ref?.$link !== 'string' ||
    !/^[a-z0-9]{8,128}$/i.test(b.ref.$link) ||
    typeof b.mimeType !== 'string' ||
    !Number.isSafeInteger(b.size)
  ) {
    throw corrupt('a pack part is not a blob reference');
  }
  return { $type: 'blob', ref: { $link: b.ref.$link }, mimeType: b.mimeType, size: b.size! };
}

/**
 * Validates one `#pack` (the same in a ref record, a ref table and a table's part): a hex id, an
 * integer size of at least 32 and count of at least 0, and either inline bytes of exactly `size` or
 * 1–1000 blob references whose sizes add up to it. `corrupt` says which record was wrong.
 */
export function parsePack(v: unknown, corrupt: Fail): PackEntry {
  const p = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
  const size = p['size'];
  const count = p['count'];
  if (
    !isObjectId(p['id']) ||
    !Number.isSafeInteger(size) ||
    !Number.isSafeInteger(count) ||
    (size as number) < MIN_PACK ||
    (count as number) < 0
  ) {
    throw corrupt('a pack lacks its id, size or count');
  }
  const pack: PackEntry = { id: p['id'], size: size as number, count: count as number };
  const sealed = p['sealed'] as { stored?: unknown; epoch?: unknown } | undefined;
  if (sealed !== undefined) {
    if (!Number.isSafeInteger(sealed?.stored) || !Number.isSafeInteger(sealed?.epoch))
      throw corrupt(`pack ${pack.id} has an invalid sealed size or epoch`);
    pack.sealed = { stored: sealed.stored as number, epoch: sealed.epoch as number };
  }
  const holds = parseHolds(p);
  if (holds !== undefined) pack.holds = holds;
  const inline = p['inline'] as { $bytes?: unknown } | null | undefined;
  if (inline !== undefined) {
    if (typeof inline !== 'object' || inline === null || typeof inline.$bytes !== 'string')
      throw corrupt('inline pack bytes are not bytes');
    pack.inline = Buffer.from(inline.$bytes, 'base64');
    if (pack.inline.length !== pack.size)
      throw corrupt(`pack ${pack.id} has ${pack.inline.length} bytes, not ${pack.size}`);
  } else if (Array.isArray(p['parts']) && p['parts'].length > 0 && p['parts'].length <= MAX_PARTS) {
    pack.parts = p['parts'].map((b) => parseBlobRef(b, corrupt));
    if (pack.parts.reduce((n, b) => n + b.size, 0) !== (pack.sealed?.stored ?? pack.size))
      throw corrupt(`pack ${pack.id}'s parts do not add up`);
  } else {
    throw corrupt(`pack ${pack.id} has neither inline bytes nor parts`);
  }
  return pack;
}

/**
 * A pack's `holds`, read leniently: a kind this reader does not know, or a `blob` without a valid id
 * and size, is a pack that may hold anything (downloaded whenever any object is wanted), which is
 * always safe — the ref's list still holds every object its target reaches.
 */
function parseHolds(p: Record<string, unknown>): PackHolds | undefined {
  const kind = p['holds'];
  if (kind === 'structure' || kind === 'blobs') return { kind };
  const oid = p['oid'];
  const blobSize = p['blobSize'];
  if (kind === 'blob' && isObjectId(oid) && Number.isSafeInteger(blobSize) && (blobSize as number) >= 0)
    return { kind, oid, blobSize: blobSize as number };
  return undefined;
}

/** A pack's JSON form for putRecord/applyWrites (bytes as `$bytes`). */
export function writePack(p: PackEntry): Record<string, unknown> {
  return {
    id: p.id,
    size: p.size,
    count: p.count,
    ...(p.inline === undefined ? {} : { inline: { $bytes: Buffer.from(p.inline).toString('base64') } }),
    ...(p.parts === undefined ? {} : { parts: p.parts }),
    ...(p.sealed === undefined ? {} : { sealed: p.sealed }),
    ...(p.holds === undefined ? {} : { holds: p.holds.kind }),
    ...(p.holds?.kind === 'blob' ? { oid: p.holds.oid, blobSize: p.holds.blobSize } : {}),
  };
}
