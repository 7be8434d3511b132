/** Collection NSIDs; their lexicons are in the repository's lexicons/ folder. */
export const REPO_COLLECTION = 'dev.knotless.repo';
export const REF_COLLECTION = 'dev.knotless.ref';

/**
 * Every ref record of a repository has a key starting with this prefix, so that they are contiguous
 * in a listing. `~` cannot occur in a repository name, which makes the prefix unambiguous.
 */
export function refKeyPrefix(repo: string): string {
  return `${repo}~`;
}
/** A device's public key (private repositories' keys are wrapped to these). */
export const KEY_COLLECTION = 'dev.knotless.key';
