import { KnotlessError } from '../errors.ts';
import type { PackFile } from '../git/pack-file.ts';
import { isObjectId, isValidRefName } from '../git/refname.ts';
import { REF_COLLECTION } from './collections.ts';
import { hasUnsafe, safeText } from '../text/terminal.ts';

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
  /** Decrypts a sealed pack's blobs into a new temporary file under `dir`; set when its record was opened. */
  decrypt?: (file: PackFile, dir: string) => Promise<PackFile>;
  /** Starts loading what `decrypt` needs, without waiting: called as the blobs start to download. */
  decryptSoon?: () => void;
}

/** A `dev.knotless.ref` record: one ref (or the symbolic HEAD) of one repository. */
export interface RefRecord {
  repo: string;
  ref: string;
  target?: string;
  symref?: string;
  peeled?: string;
  /** Packs that together hold every object reachable from `target`, each thin only against earlier ones. */
  packs: PackEntry[];
  updatedAt: string;
}

/** Largest record knotless accepts from a PDS (its JSON form); a bigger one is refused before parsing. */
export const MAX_RECORD_BYTES = 1_000_000;
/** Cap on a getRecord answer: the largest record plus its envelope (uri, cid) and JSON's escapes. */
export const RECORD_ANSWER_BYTES = MAX_RECORD_BYTES + 64 * 1024;
/** Most packs one ref may list (the lexicon's limit), and most blobs one pack may be split into. */
export const MAX_PACKS = 1000;
export const MAX_PARTS = 1000;
/** The smallest pack there is: a 12-byte header and a 20-byte checksum. */
const MIN_PACK = 32;

function corrupt(what: string): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `The remote holds an invalid ref record (${what}); it was ignored.`,
  );
}

function parseBlobRef(v: unknown): BlobRef {
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

function parsePack(v: unknown): PackEntry {
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
  const inline = p['inline'] as { $bytes?: unknown } | null | undefined;
  if (inline !== undefined) {
    if (typeof inline !== 'object' || inline === null || typeof inline.$bytes !== 'string')
      throw corrupt('inline pack bytes are not bytes');
    pack.inline = Buffer.from(inline.$bytes, 'base64');
    if (pack.inline.length !== pack.size)
      throw corrupt(`pack ${pack.id} has ${pack.inline.length} bytes, not ${pack.size}`);
  } else if (Array.isArray(p['parts']) && p['parts'].length > 0 && p['parts'].length <= MAX_PARTS) {
    pack.parts = p['parts'].map(parseBlobRef);
    if (pack.parts.reduce((n, b) => n + b.size, 0) !== (pack.sealed?.stored ?? pack.size))
      throw corrupt(`pack ${pack.id}'s parts do not add up`);
  } else {
    throw corrupt(`pack ${pack.id} has neither inline bytes nor parts`);
  }
  return pack;
}

/** A field that must be a string when present (the lexicon's types); undefined when absent. */
function optionalString(v: Record<string, unknown>, field: string, ref: string): string | undefined {
  const value = v[field];
  if (value !== undefined && typeof value !== 'string')
    throw corrupt(`${safeText(ref, 100)} has a ${field} that is not a string`);
  return value;
}

/**
 * Validates a record read from a PDS against the lexicon (lexicons/dev/knotless/ref.json): every
 * field it defines must have its type (a wrong type is refused, never read as a default), the
 * required ones must be there; unknown fields are ignored. A ref name holding a character that would
 * act on a terminal is refused too: git prints ref names as they are, where we cannot escape them.
 */
export function parseRefRecord(value: unknown): RefRecord {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw corrupt('it is not an object');
  const v = value as Record<string, unknown>;
  const ref = v['ref'];
  if (typeof ref !== 'string') throw corrupt('no ref name');
  const name = safeText(ref, 100);
  if (typeof v['repo'] !== 'string') throw corrupt(`${name} names no repository`);
  const packs = v['packs'];
  if (!Array.isArray(packs)) throw corrupt(`${name} has a pack list that is not a list`);
  if (packs.length > MAX_PACKS) throw corrupt(`${name} lists more than ${MAX_PACKS} packs`);
  const updatedAt = v['updatedAt'];
  if (typeof updatedAt !== 'string') throw corrupt(`${name} has no updatedAt time`);
  const target = optionalString(v, 'target', ref);
  const symref = optionalString(v, 'symref', ref);
  const peeled = optionalString(v, 'peeled', ref);
  const record: RefRecord = { repo: v['repo'], ref, packs: packs.map(parsePack), updatedAt };
  if (ref === 'HEAD') {
    if (symref === undefined || !isValidRefName(symref) || hasUnsafe(symref))
      throw corrupt('HEAD names no valid ref');
    record.symref = symref;
    return record;
  }
  if (!isValidRefName(ref) || hasUnsafe(ref)) throw corrupt(`"${name}" is not a valid ref name`);
  if (symref !== undefined) throw corrupt(`${name} has a symref, which only HEAD may have`);
  if (!isObjectId(target)) throw corrupt(`${name} has no valid target`);
  record.target = target;
  if (peeled !== undefined) {
    if (!isObjectId(peeled)) throw corrupt(`${name} has an invalid peeled id`);
    record.peeled = peeled;
  }
  return record;
}

/** The JSON form of a record for putRecord/applyWrites (bytes as `$bytes`). */
export function writeRefRecord(record: RefRecord): Record<string, unknown> {
  return {
    $type: REF_COLLECTION,
    repo: record.repo,
    ref: record.ref,
    ...(record.target === undefined ? {} : { target: record.target }),
    ...(record.symref === undefined ? {} : { symref: record.symref }),
    ...(record.peeled === undefined ? {} : { peeled: record.peeled }),
    packs: record.packs.map((p) => ({
      id: p.id,
      size: p.size,
      count: p.count,
      ...(p.inline === undefined ? {} : { inline: { $bytes: Buffer.from(p.inline).toString('base64') } }),
      ...(p.parts === undefined ? {} : { parts: p.parts }),
      ...(p.sealed === undefined ? {} : { sealed: p.sealed }),
    })),
    updatedAt: record.updatedAt,
  };
}

/** Total inline bytes a record carries; bounded so that listings stay small. */
export function inlineBytes(packs: PackEntry[]): number {
  return packs.reduce((n, p) => n + (p.inline?.length ?? 0), 0);
}

/** The ordered union of pack lists, each pack once (bases stay before the packs thin on them). */
export function unionPacks(lists: PackEntry[][]): PackEntry[] {
  const seen = new Map<string, PackEntry>();
  for (const list of lists) for (const p of list) if (!seen.has(p.id)) seen.set(p.id, p);
  return [...seen.values()];
}
