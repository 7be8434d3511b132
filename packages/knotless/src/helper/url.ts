import { KnotlessError } from '../errors.ts';
import { checkRepoName } from '../repo/name.ts';

/** What a `knotless://` URL names. */
export interface KnotlessUrl {
  /** A handle or DID. */
  owner: string;
  repo: string;
}

/**
 * Parses `knotless://<handle-or-did>/<repo>` (a trailing `/` or `.git` is allowed). Hand-parsed:
 * a DID's colons make the authority invalid for WHATWG URL parsing.
 */
export function parseKnotlessUrl(url: string): KnotlessUrl {
  const bad = (why: string) =>
    new KnotlessError(
      'invalid-url',
      `"${url}" is not a knotless URL (${why}); use knotless://<handle-or-did>/<repo>.`,
    );
  const m = /^knotless:\/\/([^/]+)\/([^/]+?)(?:\.git)?\/?$/.exec(url);
  if (m === null) throw bad('expected knotless://owner/repo');
  const owner = decodeURIComponent(m[1]!).replace(/^@/, '');
  if (!/^(did:[a-z]+:[A-Za-z0-9._:%-]+|[A-Za-z0-9.-]+)$/.test(owner))
    throw bad(`"${owner}" is not a handle or DID`);
  return { owner, repo: checkRepoName(decodeURIComponent(m[2]!)) };
}
