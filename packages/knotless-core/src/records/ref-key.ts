import crypto from 'node:crypto';
import { refKeyPrefix } from './collections.ts';

/** Record keys are at most 512 characters. */
export const MAX_RECORD_KEY = 512;

const LITERAL = /^[A-Za-z0-9.-]$/;

/**
 * Encodes a ref name for a record key (`A-Za-z0-9 . - _ : ~` only). Letters, digits, `.` and `-`
 * stand for themselves, `/` becomes `_`, and every other UTF-8 byte becomes `:` and two upper-case
 * hex digits. No output character is ambiguous, so the encoding is injective; `~` never appears.
 */
export function writeRefName(ref: string): string {
  let out = '';
  for (const byte of Buffer.from(ref, 'utf8')) {
    const ch = String.fromCharCode(byte);
    if (LITERAL.test(ch)) out += ch;
    else if (ch === '/') out += '_';
    else out += `:${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Decodes {@link writeRefName}; undefined when `encoded` is not such an encoding. */
export function parseRefName(encoded: string): string | undefined {
  const bytes: number[] = [];
  for (let i = 0; i < encoded.length; i++) {
    const ch = encoded[i]!;
    if (ch === '_') bytes.push(0x2f);
    else if (ch === ':') {
      const hex = encoded.slice(i + 1, i + 3);
      if (!/^[0-9A-F]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else if (LITERAL.test(ch)) bytes.push(ch.charCodeAt(0));
    else return undefined;
  }
  const text = Buffer.from(bytes).toString('utf8');
  return writeRefName(text) === encoded ? text : undefined;
}

/**
 * The hashed key, for names too long to encode or whose encoding the PDS refuses (it filters some
 * words out of record keys). `~~` cannot occur in an encoded key, so the two kinds never collide;
 * hex digits spell no word the filter looks for.
 */
export function hashedRefKey(repo: string, ref: string): string {
  const digest = crypto.createHash('sha256').update(ref, 'utf8').digest('hex').slice(0, 32);
  return `${refKeyPrefix(repo)}~${digest}`;
}

/** The record key of a ref: the readable encoding when it fits, else the hashed key. */
export function refKey(repo: string, ref: string): string {
  const key = refKeyPrefix(repo) + writeRefName(ref);
  return key.length <= MAX_RECORD_KEY ? key : hashedRefKey(repo, ref);
}
