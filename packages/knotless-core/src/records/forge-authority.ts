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

/** What the rule decides: the state, and the labels and merged commit the owner gave. */
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
 * An account's latest decision: the one with the greatest record key. Record keys are TIDs, made
 * in the order their writer made them, and one account's keys are unique; `createdAt` is not read,
 * so no date anyone writes decides anything. Both sides choose their keys too, which is why only one
 * account's own records are ever ordered against each other (a key far in the future only stops
 * that account overriding itself).
 */
function latest<T extends { rkey: string }>(list: T[]): T | undefined {
  return list.reduce<T | undefined>(
    (best, d) => (best === undefined || d.rkey > best.rkey ? d : best),
    undefined,
  );
}

/**
 * The authority rule (format.md): only the repository owner's and the author's records count, and
 * no record is ordered against another account's. Each account's latest counting record is its
 * decision: the owner's may be any state, with labels; the author's only `open` or `closed`. Then
 * the owner's `merged` is final; a `closed` by either stands against the other (the owner's close
 * cannot be undone by the author, nor the author's withdrawal by the owner); otherwise the subject
 * is open, which is also what it is with no decision. Labels are the owner's latest decision's.
 */
export function decide<S extends string>(
  decisions: Decision<S>[],
  owner: string,
  author: string,
  authorMay: readonly S[],
): Decided<S> {
  const own = latest(decisions.filter((d) => d.by === owner));
  const theirs =
    author === owner
      ? undefined
      : latest(decisions.filter((d) => d.by === author && authorMay.includes(d.state)));
  const labels = own?.labels ?? [];
  if (own?.state === 'merged')
    return {
      state: own.state,
      labels,
      by: owner,
      ...(own.merged === undefined ? {} : { merged: own.merged }),
      ...(own.ignoredChecks === undefined ? {} : { ignoredChecks: own.ignoredChecks }),
    };
  const closing = [own, theirs].find((d) => d !== undefined && d.state !== 'open');
  const won = closing ?? own ?? theirs;
  if (won === undefined) return { state: 'open' as S, labels };
  return { state: won.state, labels, by: won.by };
}

/** What a pull request's author may decide of their own: close it and reopen it, never merge it. */
export const PULL_AUTHOR_MAY = ['open', 'closed'] as const;
/** What an issue's author may decide of their own. */
export const ISSUE_AUTHOR_MAY = ['open', 'closed'] as const;
