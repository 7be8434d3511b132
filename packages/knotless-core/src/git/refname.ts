/**
 * Git's ref-name rules (git check-ref-format), checked in-process because a listing can hold
 * thousands of names and a process per name would cost more than the fetch. A component may be
 * `@` (refs/heads/@ is valid): git forbids only the whole name `@`, which never starts with refs/.
 */
export function isValidRefName(name: string): boolean {
  if (!name.startsWith('refs/') || name.endsWith('/') || name.endsWith('.')) return false;
  if (name.includes('..') || name.includes('@{') || name.includes('//')) return false;
  // eslint-disable-next-line no-control-regex -- control characters are exactly what git forbids
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(name)) return false;
  return name.split('/').every((part) => part !== '' && !part.startsWith('.') && !part.endsWith('.lock'));
}

/** True for a full hex object id of the SHA-1 object format. */
export function isObjectId(value: unknown): value is string {
  return typeof value === 'string' && /^[0-9a-f]{40}$/.test(value);
}

/** The all-zero object id git uses for "no object". */
export const ZERO_OID = '0'.repeat(40);
