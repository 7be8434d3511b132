// The two ways a handler ends a request early; apart from site.ts so that modules site.ts names
// (images.ts) can use them without an import cycle.

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
