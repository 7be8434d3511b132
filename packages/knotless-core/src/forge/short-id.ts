/**
 * The short ids of issues and pull requests, and how their times are shown: one rule for the CLI and
 * the appview's pages, so that a number read aloud from one is found by the other.
 *
 * An item's short id comes from its record key, which every reader sees alike (an order of creation
 * as one appview indexed it is not: another indexed in another order). Keys are TIDs: 11 characters
 * of microseconds since 1970, then 2 of the writer's clock id, often the same for every record a PDS
 * writes. Their first characters change once in years, so a prefix would be the same for every item;
 * the last ones of the time change every second: the short id is the 4 characters of the time just
 * before the clock id, lengthened towards the start while another item's key gives the same, as git
 * lengthens an abbreviated id. A key that is not a TID is its own short id.
 */

import { isTid } from '../tid.ts';

/** How many characters a short id has at the least. */
const MIN = 4;

/** `rkey`'s short id of length `n` (its whole key when it is not a TID, or when `n` covers it). */
function cut(rkey: string, n: number): string {
  return isTid(rkey) && n < 11 ? rkey.slice(11 - n, 11) : rkey;
}

/**
 * The short id of each key among `rkeys` (the items of one kind in one repository): the shortest, of
 * at least 4 characters, that no other key of the set has. Equal keys (two authors' items with one
 * key) share theirs; the CLI then asks for the whole id.
 */
export function shortIds(rkeys: Iterable<string>): Map<string, string> {
  const keys = [...new Set(rkeys)];
  const out = new Map<string, string>();
  for (const key of keys) {
    let n = MIN;
    while (n < 11 && keys.some((k) => k !== key && cut(k, n) === cut(key, n))) n += 1;
    out.set(key, cut(key, n));
  }
  return out;
}

/** The keys among `rkeys` that `short` names: the key itself, or a TID whose short ids include it. */
export function keysNamed(short: string, rkeys: Iterable<string>): string[] {
  const s = short.toLowerCase();
  const all = [...new Set(rkeys)];
  const exact = all.filter((k) => k === short);
  if (exact.length > 0) return exact;
  if (s.length < MIN || s.length > 11) return [];
  return all.filter((k) => isTid(k) && cut(k, s.length) === s);
}

/**
 * A time as shown: `2026-12-04 22:50:55 UTC`, the zone named, whatever offset the record was written
 * with; undefined when `iso` is no time (a record's dates are its author's word).
 */
export function utcTime(iso: string | null | undefined): string | undefined {
  if (iso === null || iso === undefined || iso === '') return undefined;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return undefined;
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}
