// The authority rule for pull requests and issues, in one place for the CLI and the appview: who
// may decide a state, and which of their records decides it.

/** One status or state record, as the authority rule needs it. */
export interface Decision<S extends string> {
  /** Who wrote it: the DID of the account it is in. */
  by: string;
  rkey: string;
  state: S;
  merged?: string;
  ignoredChecks?: string[];
  labels?: string[];
  createdAt: string;
}

/** What the rule decides: the state, and the labels and merged commit the team gave. */
export interface Decided<S extends string> {
  state: S;
  merged?: string;
  /** The required checks a merge overrode, each with why it had not passed. */
  ignoredChecks?: string[];
  labels: string[];
  /** The DID whose record decided, when one did. */
  by?: string;
}

/**
 * Who decides for a repository: its owner and the maintainers the owner's ref table lists now
 * (records/maintainers.ts reads them). A maintainer removed from the list decides nothing any more,
 * whatever their records say or however they are keyed.
 */
export interface Team {
  owner: string;
  maintainers: readonly string[];
}

/** A team as the rule's callers may give it: a DID alone is an owner with no maintainers. */
export function teamOf(team: Team | string): Team {
  return typeof team === 'string' ? { owner: team, maintainers: [] } : team;
}

/** Whether `did` decides for the repository: its owner or one of its maintainers. */
export function inTeam(team: Team, did: string): boolean {
  return did === team.owner || team.maintainers.includes(did);
}

/**
 * The latest of `list`: the greatest record key, and between two accounts' records with the same
 * key the one whose DID sorts first (keys are unique only within an account). Record keys are
 * TIDs, made in the order their writer made them; `createdAt` is not read, so no date anyone writes
 * decides anything.
 */
function latest<T extends { rkey: string; by: string }>(list: T[]): T | undefined {
  return list.reduce<T | undefined>(
    (best, d) =>
      best === undefined || d.rkey > best.rkey || (d.rkey === best.rkey && d.by < best.by) ? d : best,
    undefined,
  );
}

/** The team's latest decision on an item: the one record of the owner's and the maintainers' that counts. */
export function teamDecision<S extends string>(
  decisions: Decision<S>[],
  team: Team | string,
): Decision<S> | undefined {
  const t = teamOf(team);
  return latest(decisions.filter((d) => inTeam(t, d.by)));
}

/**
 * The authority rule (format.md): only the records of the repository's team (its owner and the
 * maintainers its owner lists now) and of the author count. The team decides as one: its decision
 * is the latest of all its members' records (a maintainer reopens what the owner closed, and the
 * owner what a maintainer closed), and may be any state, with labels. The author's decision is their
 * own latest record, only `open` or `closed`, and is never ordered against the team's: the team's
 * `merged` is final; a `closed` by either stands against the other (the team's close cannot be
 * undone by the author, nor the author's withdrawal by the team); otherwise the subject is open,
 * which is also what it is with no decision. Labels are the team's latest decision's. An author
 * who is in the team decides as the team. `team` may be the owner's DID alone (no maintainers).
 */
export function decide<S extends string>(
  decisions: Decision<S>[],
  team: Team | string,
  author: string,
  authorMay: readonly S[],
): Decided<S> {
  const t = teamOf(team);
  const own = teamDecision(decisions, t);
  const theirs = inTeam(t, author)
    ? undefined
    : latest(decisions.filter((d) => d.by === author && authorMay.includes(d.state)));
  const labels = own?.labels ?? [];
  if (own?.state === 'merged')
    return {
      state: own.state,
      labels,
      by: own.by,
      ...(own.merged === undefined ? {} : { merged: own.merged }),
      ...(own.ignoredChecks === undefined ? {} : { ignoredChecks: own.ignoredChecks }),
    };
  const closing = [own, theirs].find((d) => d !== undefined && d.state !== 'open');
  const won = closing ?? own ?? theirs;
  if (won === undefined) return { state: 'open' as S, labels };
  return { state: won.state, labels, by: won.by };
}

/**
 * The team decisions to write for the owner before `removed` leaves the team, so that what the
 * repository held stays (format.md, "The authority rule"): for each item, given its decisions and
 * author, the team's latest decision when it is `removed`'s (their record counts for nothing once
 * they are off the list, so the owner copies it), else undefined.
 */
export function heldDecision<S extends string>(
  decisions: Decision<S>[],
  team: Team,
  removed: string,
): Decision<S> | undefined {
  const own = teamDecision(decisions, team);
  return own !== undefined && own.by === removed && removed !== team.owner ? own : undefined;
}

/** What a pull request's author may decide of their own: close it and reopen it, never merge it. */
export const PULL_AUTHOR_MAY = ['open', 'closed'] as const;
/** What an issue's author may decide of their own. */
export const ISSUE_AUTHOR_MAY = ['open', 'closed'] as const;
