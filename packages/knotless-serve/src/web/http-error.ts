// The two ways a handler ends a request early; apart from site.ts so that modules site.ts names
// (images.ts) can use them without an import cycle.
import type { SafeHtml } from './html.ts';

/**
 * A page-level failure with the HTTP status to answer. `body`, when given, is the page shown instead
 * of the bare sentence: a refused form shown again with what the reader typed, and the sentence.
 */
export class HttpError extends Error {
  override name = 'HttpError';
  readonly status: number;
  readonly body: SafeHtml | undefined;
  constructor(status: number, message: string, body?: SafeHtml) {
    super(message);
    this.status = status;
    this.body = body;
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

/** What each status an account's PDS gives it reads as in a sentence. */
const STATES: Record<string, string> = {
  deactivated: 'deactivated',
  takendown: 'taken down by its PDS',
  suspended: 'suspended by its PDS',
  deleted: 'deleted',
};

/**
 * The page (410 Gone) for an account that is not active: it names the account and its state, so a
 * reader is not left looking for a typo. Its repositories come back when it is active again; a
 * deleted account's are gone.
 */
export function inactiveAccount(actor: string, status: string): HttpError {
  const state = STATES[status] ?? `not active (${status})`;
  const then =
    status === 'deleted'
      ? 'its repositories are gone.'
      : 'its repositories are hidden until it is active again.';
  return new HttpError(410, `The account ${actor} is ${state}; ${then}`);
}
