import type { Index } from '../db/index-store.ts';
import type { Mirror } from '../mirror/mirror.ts';
import type { ImageProxy } from './images.ts';

/** What every request handler needs. */
export interface Site {
  index: Index;
  mirror: Mirror;
  /** The appview's public URL, without a trailing slash. */
  publicUrl: string;
  log(line: string): void;
  /** Time limits, in ms: every request but smart-HTTP git, and smart-HTTP git. */
  requestTimeoutMs: number;
  gitTimeoutMs: number;
  /** Fetches README images from other hosts for readers, and signs the addresses pages use. */
  images: ImageProxy;
}

/** A repository a request is about, found in the index and its mirror. */
export interface RepoTarget {
  did: string;
  /** How the URL named the owner (handle, else DID): links keep using it. */
  owner: string;
  name: string;
  description: string | null;
  gitDir: string;
  /** The repository this one was forked from (its record's forkOf), as pages name it. */
  forkOf: { owner: string; name: string } | null;
  /** Its contents are encrypted for its members: nothing of them is indexed or shown. */
  private: boolean;
}

export { HttpError, Redirect } from './http-error.ts';
