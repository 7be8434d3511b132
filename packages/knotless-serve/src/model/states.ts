// What a list of pull requests or issues is filtered on, for the index's queries (db/), the pages'
// `?state=` and the XRPC queries' `state` (web/): one list of filters per kind, and one rule for
// reading a filter, which each front worded its own way (a page's 404, a query's 400).

/** A state a list shows, or all of them. */
export type StateFilter = 'open' | 'closed' | 'merged' | 'all';

/** The filters each kind's lists offer, in the order pages show them, `all` last: an issue is never merged. */
export const STATE_FILTERS = {
  pulls: ['open', 'closed', 'merged', 'all'],
  issues: ['open', 'closed', 'all'],
} as const satisfies Record<'pulls' | 'issues', readonly StateFilter[]>;

/** `raw` as one of `allowed` (`open` when absent), or undefined when it is none of them. */
export function stateFilter(raw: string | null, allowed: readonly StateFilter[]): StateFilter | undefined {
  const s = raw ?? 'open';
  return (allowed as readonly string[]).includes(s) ? (s as StateFilter) : undefined;
}
