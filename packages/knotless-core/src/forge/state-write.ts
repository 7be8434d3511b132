// Who may write which state record, checked before writing by every front end (the CLI's
// `close` / `reopen` / `merge`, the appview's buttons), so that a record the authority rule
// (records/forge-authority.ts) would ignore is never written.
import { KnotlessError } from '../errors.ts';
import { decide, inTeam, teamDecision, type Decision, type Team } from '../records/forge-authority.ts';
import { safeText } from '../text/terminal.ts';
import { tidAfter } from '../tid.ts';

export interface StateWrite {
  /** The DID of the account that would write the record. */
  me: string;
  /** How that account is named in a refusal (its handle). */
  myName: string;
  /** The repository's owner's DID, and how it is named. */
  owner: string;
  /** The maintainers the owner's table lists now (records/maintainers.ts): they decide as the owner. */
  maintainers: readonly string[];
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

/** The team a state write is decided by. */
export function writeTeam(w: Pick<StateWrite, 'owner' | 'maintainers'>): Team {
  return { owner: w.owner, maintainers: w.maintainers };
}

/** Who decides for the repository, as a refusal names them: its owner, or its owner or maintainers. */
export function deciders(w: Pick<StateWrite, 'label' | 'maintainers'>): string {
  return `${w.label}'s owner${w.maintainers.length === 0 ? '' : ' or maintainers'}`;
}

/** Throws `permission-denied` (or `usage` for a merged item) when `w.me` may not write `w.state`. */
export function checkStateWrite(w: StateWrite): void {
  const decides = inTeam(writeTeam(w), w.me);
  if (!decides && !(w.me === w.author && w.authorMay.includes(w.state)))
    throw new KnotlessError(
      'permission-denied',
      `Only ${deciders(w)}${w.authorMay.includes(w.state) ? ` or the ${w.noun}'s author` : ''} can ${w.state === 'open' ? 'reopen' : w.state === 'merged' ? 'merge' : 'close'} it; you are ${safeText(w.myName)}.`,
    );
  if (!decides && w.current === 'merged')
    throw new KnotlessError('usage', `${safeText(w.id)} is merged; only ${deciders(w)} can change that.`);
}

/** The state record to write (before `$type`): the team's keeps the labels the item has. */
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
 * The key of a new decision by `me`: a new TID, or, for a member of the team, one just after the
 * team's latest decision when that is keyed later (another member's clock ahead of ours): the team
 * decides by its latest record, so a member's new decision must be keyed after every one it
 * answers, or it would count for nothing.
 */
export function decisionKey(now: string, decisions: Decision<string>[], team: Team, me: string): string {
  if (!inTeam(team, me)) return now;
  const last = teamDecision(decisions, team);
  if (last === undefined || last.rkey < now) return now;
  const after = tidAfter(last.rkey);
  if (after === undefined)
    throw new KnotlessError(
      'permission-denied',
      `A decision on this item is keyed after every key a record can have, so no later one can follow it; the repository's owner can remove the maintainer who wrote it.`,
    );
  return after;
}

/**
 * Throws `permission-denied`, naming who decided, when a state record `w.me` would write with key
 * `rkey` leaves the item in another state than `expect` (the state written, unless only labels
 * change) once decided again with the records already on it: the author reopening over the team's
 * close, the team reopening over the author's withdrawal. Such a record would count for nothing
 * and is never written.
 */
export function checkOutcome(
  w: StateWrite & { decisions: Decision<string>[]; rkey: string; authorName: string; expect?: string },
): void {
  const team = writeTeam(w);
  const next = decide(
    [...w.decisions, { by: w.me, rkey: w.rkey, state: w.state, createdAt: new Date().toISOString() }],
    team,
    w.author,
    w.authorMay,
  );
  if (next.state === (w.expect ?? w.state) || next.by === undefined) return;
  const who = next.by === w.owner ? `${w.label}'s owner` : `A maintainer of ${w.label}`;
  const may = w.maintainers.length === 0 ? 'they' : `its owner or maintainers`;
  throw new KnotlessError(
    'permission-denied',
    inTeam(team, next.by)
      ? `${who} ${next.state === 'merged' ? 'merged' : 'closed'} ${safeText(w.id)}; only ${may} can ${next.state === 'merged' ? 'change that' : 'reopen it'}.`
      : `Its author, ${safeText(w.authorName)}, closed ${safeText(w.id)}; only they can reopen it.`,
  );
}

/**
 * The state an item has by `did`'s side of the rule (`open` with none): for a member of the team,
 * the team's latest decision (what a label change keeps); for anyone else, their own latest.
 */
export function stateBy(decisions: Decision<string>[], did: string, team?: Team): string {
  const own =
    team !== undefined && inTeam(team, did)
      ? teamDecision(decisions, team)
      : decisions
          .filter((d) => d.by === did)
          .reduce<Decision<string> | undefined>(
            (a, b) => (a === undefined || b.rkey > a.rkey ? b : a),
            undefined,
          );
  return own?.state ?? 'open';
}
