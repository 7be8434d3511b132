import { KnotlessError } from '../errors.ts';
import { isObjectId } from '../git/refname.ts';
import { isSafeRefName, MAX_PACKS, parsePack, writePack, type PackEntry } from './ref-rules.ts';
import { REF_COLLECTION } from './collections.ts';
import { safeText } from '../text/terminal.ts';

export type { BlobRef, PackEntry } from './ref-rules.ts';

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
export { MAX_PACKS, MAX_PARTS } from './ref-rules.ts';

function corrupt(what: string): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `The remote holds an invalid ref record (${what}); it was ignored.`,
  );
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
  const record: RefRecord = {
    repo: v['repo'],
    ref,
    packs: packs.map((p) => parsePack(p, corrupt)),
    updatedAt,
  };
  if (ref === 'HEAD') {
    if (!isSafeRefName(symref)) throw corrupt('HEAD names no valid ref');
    record.symref = symref;
    return record;
  }
  if (!isSafeRefName(ref)) throw corrupt(`"${name}" is not a valid ref name`);
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
    packs: record.packs.map(writePack),
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
