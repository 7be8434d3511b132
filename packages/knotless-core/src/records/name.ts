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

/** Parses `[handle-or-did/]name`. */
export function parseRepoSpec(spec: string): RepoSpec {
  const slash = spec.lastIndexOf('/');
  if (slash === -1) return { owner: undefined, name: checkRepoName(spec) };
  const owner = spec.slice(0, slash);
  if (owner === '')
    throw new KnotlessError(
      'usage',
      `"${spec}" names no account before "/"; write handle/name or just name.`,
    );
  return { owner, name: checkRepoName(spec.slice(slash + 1)) };
}
