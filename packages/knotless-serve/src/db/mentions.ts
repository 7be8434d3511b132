// Which handles a pull request's, issue's or comment's text mentions, kept in the index beside the
// row (`mentions`), so that a reader's notifications find the texts that name them by an exact
// match in SQL: a pattern (`like '%@bob.test%'`) also finds `@bob.testing`, and a flood of such
// look-alikes could push a real mention past any number of rows read to pass over them.
import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.ts';

/**
 * The most handles one text is indexed as mentioning (the first ones, in order): a body of 100,000
 * characters could name thousands, and each is a row. A text meant for people names a few.
 */
export const MENTIONS_KEPT = 100;

/** The tables whose rows' `body` is searched for mentions. */
export type MentionTable = 'pulls' | 'issues' | 'comments';

/**
 * The handles `body` mentions, lower-cased, each once, in order, at most {@link MENTIONS_KEPT}: an
 * `@` not preceded by a handle's character (so `x@bob.test`, an address, is none) and the whole run
 * of handle characters after it, without a final full stop (a sentence may end with a mention), so
 * `@bob.testing` and `@bob.test.example` name those handles, not `bob.test`.
 */
export function mentionedHandles(body: string): string[] {
  const out = new Set<string>();
  for (const m of body.toLowerCase().matchAll(/(?<![a-z0-9._-])@([a-z0-9_-]+(?:\.[a-z0-9_-]+)*)/g)) {
    out.add(m[1]!);
    if (out.size === MENTIONS_KEPT) break;
  }
  return [...out];
}

/** Whether `body` mentions `handle` as a whole handle. */
export function mentions(body: string, handle: string): boolean {
  return mentionedHandles(body).includes(handle.toLowerCase());
}

/** Keeps the mentions of one row in step with its body (none when the row is gone). */
export async function indexMentions(
  tx: Kysely<Database> | Transaction<Database>,
  tab: MentionTable,
  did: string,
  rkey: string,
  body: string | null | undefined,
): Promise<void> {
  await tx
    .deleteFrom('mentions')
    .where('tab', '=', tab)
    .where('did', '=', did)
    .where('rkey', '=', rkey)
    .execute();
  const handles = mentionedHandles(body ?? '');
  if (handles.length === 0) return;
  await tx
    .insertInto('mentions')
    .values(handles.map((handle) => ({ tab, did, rkey, handle })))
    .execute();
}
