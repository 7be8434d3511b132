import { KnotlessError } from '../errors.ts';
import { checkRepoName } from './name.ts';

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
  // decodeURIComponent throws on a malformed escape (%E0): that is a bad URL, not a crash.
  const decode = (part: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      throw bad(`"${part}" has a malformed %-escape`);
    }
  };
  const owner = decode(m[1]!).replace(/^@/, '');
  // A handle is dot-separated labels (no empty ones, so never ".."); a DID keeps its own syntax.
  if (!/^(did:[a-z]+:[A-Za-z0-9._:%-]+|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*)$/.test(owner))
    throw bad(`"${owner}" is not a handle or DID`);
  return { owner, repo: checkRepoName(decode(m[2]!)) };
}
