import crypto from 'node:crypto';

/**
 * The objects of packs this process has already indexed or made, by the SHA-256 of the pack's bytes
 * (hashed here, never taken from a record: the list is exactly those bytes' objects; SHA-256, not
 * the pack's own SHA-1 trailer, so that no crafted pack can pass for one it knows). A warm agent
 * folds the pack it made on the last push into the next one; knowing that pack's objects spares the
 * fold an `index-pack` of it, and each git process costs a process start. Bounded: the
 * oldest entries go first.
 */
const MAX_PACKS = 256;
const MAX_OIDS = 200_000;
const known = new Map<string, readonly string[]>();
let oids = 0;

/** Keys already computed, by the bytes' object: a push asks for a pack's key at several steps. */
const keys = new WeakMap<Uint8Array, string>();

/** The key of a pack's bytes (hashed once per buffer: packs are never changed in place). */
export function packKey(bytes: Uint8Array): string {
  let key = keys.get(bytes);
  if (key === undefined) {
    key = crypto.createHash('sha256').update(bytes).digest('hex');
    keys.set(bytes, key);
  }
  return key;
}

/** The pack's own objects, when this process has seen its bytes. */
export function knownObjects(key: string): readonly string[] | undefined {
  return known.get(key);
}

/** Remembers a pack's own objects (in pack order, without bases a thin pack borrowed). */
export function rememberObjects(key: string, list: readonly string[]): void {
  if (known.has(key) || list.length > MAX_OIDS) return;
  known.set(key, list);
  oids += list.length;
  for (const [k, v] of known) {
    if (known.size <= MAX_PACKS && oids <= MAX_OIDS) break;
    known.delete(k);
    oids -= v.length;
  }
}
