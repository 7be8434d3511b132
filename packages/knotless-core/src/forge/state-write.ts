// Who may write which state record, checked before writing by every front end (the CLI's
// `close` / `reopen` / `merge`, the appview's buttons), so that a record the authority rule
// (records/forge-authority.ts) would ignore is never written.
import { KnotlessError } from '../errors.ts';
import { decide, type Decision } from '../records/forge-authority.ts';
import { safeText } from '../text/terminal.ts';

export interface StateWrite {
  /** The DID of the account that would write the record. */
  me: string;
  /** How that account is named in a refusal (its handle). */
  myName: string;
  /** The repository's owner's DID, and how it is named. */
  owner: string;
  label: string;
  /** The pull request's or issue's author, its current state and what the author may decide. */
  author: string;
  current: string;
  authorMay: readonly string[];
  noun: 'pull request' | 'issue';
  /** The state to write: open, closed or merged. */
  state: string;
  id: string;
}

/** Throws `permission-denied` (or `usage` for a merged item) when `w.me` may not write `w.state`. */
export function checkStateWrite(w: StateWrite): void {
  const isOwner = w.me === w.owner;
  if (!isOwner && !(w.me === w.author && w.authorMay.includes(w.state)))
    throw new KnotlessError(
      'permission-denied',
      `Only ${w.label}'s owner${w.authorMay.includes(w.state) ? ` or the ${w.noun}'s author` : ''} can ${w.state === 'open' ? 'reopen' : w.state === 'merged' ? 'merge' : 'close'} it; you are ${safeText(w.myName)}.`,
    );
  if (!isOwner && w.current === 'merged')
    throw new KnotlessError('usage', `${safeText(w.id)} is merged; only ${w.label}'s owner can change that.`);
}

/** The state record to write (before `$type`): the owner's keeps the labels the item has. */
export function stateRecord(
  word: 'pr' | 'issue',
  subject: string,
  state: string,
  keepLabels: string[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const field = word === 'pr' ? { pull: subject, status: state } : { issue: subject, state };
  const labels = keepLabels.length > 0 ? { labels: keepLabels } : {};
  return { ...field, ...extra, ...labels, createdAt: new Date().toISOString() };
}

/**
 * Throws `permission-denied`, naming who decided, when a state record `w.me` would write with key
 * `rkey` leaves the item in another state than `expect` (the state written, unless only labels
 * change) once decided again with the records already on it: the author reopening over the owner's
 * close, the owner reopening over the author's withdrawal. Such a record would count for nothing
 * and is never written.
 */
export function checkOutcome(
  w: StateWrite & { decisions: Decision<string>[]; rkey: string; authorName: string; expect?: string },
): void {
  const next = decide(
    [...w.decisions, { by: w.me, rkey: w.rkey, state: w.state, createdAt: new Date().toISOString() }],
    w.owner,
    w.author,
    w.authorMay,
  );
  if (next.state === (w.expect ?? w.state) || next.by === undefined) return;
  throw new KnotlessError(
    'permission-denied',
    next.by === w.owner
      ? `${w.label}'s owner ${next.state === 'merged' ? 'merged' : 'closed'} ${safeText(w.id)}; only they can ${next.state === 'merged' ? 'change that' : 'reopen it'}.`
      : `Its author, ${safeText(w.authorName)}, closed ${safeText(w.id)}; only they can reopen it.`,
  );
}

/** The state `did`'s own latest record gives an item (`open` with none): what a label keeps. */
export function stateBy(decisions: Decision<string>[], did: string): string {
  const own = decisions.filter((d) => d.by === did);
  return own.length === 0 ? 'open' : own.reduce((a, b) => (b.rkey > a.rkey ? b : a)).state;
}
