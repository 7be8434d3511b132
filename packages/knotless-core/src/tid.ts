/**
 * TIDs: the record keys knotless chooses and the revisions of an account's commits. Thirteen
 * characters of sortable base32: 53 bits of microseconds since 1970, then a 10-bit clock id.
 * Whether a string is one is @atproto/syntax's rule; making one and reading its time are written
 * here, a few lines each, rather than taken from @atproto/common-web, which the bundles do not
 * carry and the cold path would load for them.
 */
import crypto from 'node:crypto';
import { isValidTid } from '@atproto/syntax';

const B32 = '234567abcdefghijklmnopqrstuvwxyz';
let lastMicros = 0;

/** Whether `s` is a TID. */
export function isTid(s: string): boolean {
  return isValidTid(s);
}

/**
 * A new TID, later than every one this process made before it. Choosing a record's key ourselves
 * makes a create retried after a lost answer conflict with itself instead of writing it twice.
 */
export function newTid(): string {
  const micros = Math.max(Date.now() * 1000, lastMicros + 1);
  lastMicros = micros;
  return tidAt(micros);
}

/** The time `tid` was made, in microseconds since 1970, or undefined for a string that is not a TID. */
export function tidMicros(tid: string): number | undefined {
  if (!isTid(tid)) return undefined;
  let n = 0n;
  for (const c of tid) n = (n << 5n) | BigInt(B32.indexOf(c));
  return Number(n >> 10n);
}

/**
 * A new TID made just after `tid` (one microsecond later, any clock id): for a record that must
 * sort after one whose writer's clock ran ahead of ours. Undefined when `tid` is not a TID or is
 * at the last microsecond a TID can hold.
 */
export function tidAfter(tid: string): string | undefined {
  const micros = tidMicros(tid);
  if (micros === undefined || micros + 1 > Number.MAX_SAFE_INTEGER) return undefined;
  return tidAt(micros + 1);
}

function tidAt(micros: number): string {
  let n = (BigInt(micros) << 10n) | BigInt(crypto.randomInt(1024));
  let s = '';
  for (let i = 0; i < 13; i++) {
    s = B32[Number(n & 31n)]! + s;
    n >>= 5n;
  }
  return s;
}
