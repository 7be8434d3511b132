import type { Index } from '../db/index-store.ts';
import type { Mirror } from '../mirror/mirror.ts';

/** What every request handler needs. */
export interface Site {
  index: Index;
  mirror: Mirror;
  /** The appview's public URL, without a trailing slash. */
  publicUrl: string;
  log(line: string): void;
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
