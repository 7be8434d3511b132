import { KnotlessError } from '../errors.ts';

/** The rules for a repository name, which is also its record key. */
export const REPO_NAME_RULES =
  'letters, digits, ".", "_" and "-", 1 to 100 characters, not "." or "..", not ending in ".git"';

const NAME = /^[A-Za-z0-9._-]{1,100}$/;

/** True when `name` is a valid repository name. */
export function isValidRepoName(name: string): boolean {
  return NAME.test(name) && name !== '.' && name !== '..' && !name.toLowerCase().endsWith('.git');
}

/** Returns `name` when valid, else throws `invalid-name` with the rules. */
export function checkRepoName(name: string): string {
  if (!isValidRepoName(name)) {
    throw new KnotlessError(
      'invalid-name',
      `"${name}" is not a valid repository name: use ${REPO_NAME_RULES}.`,
    );
  }
  return name;
}

/** A repository reference typed by a user: `name` (own account) or `handle/name`. */
export interface RepoSpec {
  owner: string | undefined;
  name: string;
}

/**
 * Parses `[handle-or-did/]name`. A `knotless://owner/name` URL is taken too: users paste what
 * `repo create` printed.
 */
export function parseRepoSpec(typed: string): RepoSpec {
  const spec = typed.startsWith('knotless://') ? typed.slice('knotless://'.length) : typed;
  const parts = spec.split('/');
  if (parts.length > 2 || (parts.length === 2 && parts[0] === '')) {
    throw new KnotlessError(
      'usage',
      `"${typed}" is not a repository; write handle/name (e.g. alice.bsky.social/site) or just name.`,
    );
  }
  if (parts.length === 1) {
    if (spec !== typed) {
      throw new KnotlessError('usage', `"${typed}" names no repository; write knotless://handle/name.`);
    }
    return { owner: undefined, name: checkRepoName(spec) };
  }
  return { owner: parts[0], name: checkRepoName(parts[1]!) };
}
