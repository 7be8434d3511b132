// The authority rule for pull requests and issues, in one place for the CLI and the appview: who
// may decide a state, and which of their records decides it.

/** One status or state record, as the authority rule needs it. */
export interface Decision<S extends string> {
  /** Who wrote it: the DID of the account it is in. */
  by: string;
  rkey: string;
  state: S;
  merged?: string;
  labels?: string[];
  createdAt: string;
}

/** What the rule decides: the state, and the labels and merged commit the owner gave. */
export interface Decided<S extends string> {
  state: S;
  merged?: string;
  labels: string[];
  /** The DID whose record decided, when one did. */
  by?: string;
}

function newest<T extends { createdAt: string; rkey: string }>(list: T[]): T | undefined {
  const time = (d: T) => {
    const t = Date.parse(d.createdAt);
    return Number.isNaN(t) ? -Infinity : t;
  };
  return list.reduce<T | undefined>((best, d) => {
    if (best === undefined) return d;
    const diff = time(d) - time(best);
    return diff > 0 || (diff === 0 && d.rkey > best.rkey) ? d : best;
  }, undefined);
}

/**
 * The authority rule (FORGE.md): the repository owner's records count with any state and labels;
 * the author's count only to close or reopen their own (and not once the owner merged it); anyone
 * else's are ignored, whatever they claim. The newest counting record wins (ties: the later key); with none, the subject is open.
 */
export function decide<S extends string>(
  decisions: Decision<S>[],
  owner: string,
  author: string,
  authorMay: readonly S[],
): Decided<S> {
  const ownerLast = newest(decisions.filter((d) => d.by === owner));
  // A merge is done: the author cannot reopen or close what the owner merged.
  const authorCounts = ownerLast?.state !== 'merged';
  const counting = decisions.filter(
    (d) => d.by === owner || (authorCounts && d.by === author && authorMay.includes(d.state)),
  );
  const win = newest(counting);
  const labels = ownerLast?.labels ?? [];
  if (win === undefined) return { state: 'open' as S, labels };
  return {
    state: win.state,
    labels,
    by: win.by,
    ...(win.state === 'merged' && win.merged !== undefined && win.by === owner ? { merged: win.merged } : {}),
  };
}

/** What a pull request's author may decide of their own: close it and reopen it, never merge it. */
export const PULL_AUTHOR_MAY = ['open', 'closed'] as const;
/** What an issue's author may decide of their own. */
export const ISSUE_AUTHOR_MAY = ['open', 'closed'] as const;
