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

/** A page-level failure with the HTTP status to answer. */
export class HttpError extends Error {
  override name = 'HttpError';
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Sends the reader elsewhere (302): a README link to a directory lands on its tree page. */
export class Redirect extends Error {
  override name = 'Redirect';
  readonly location: string;
  constructor(location: string) {
    super(`redirect to ${location}`);
    this.location = location;
  }
}
