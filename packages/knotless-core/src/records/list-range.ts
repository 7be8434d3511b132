import { KnotlessError } from '../errors.ts';
import type { XrpcClient } from '../xrpc/client.ts';
import { MAX_PAGE_BYTES, MAX_PAGES, rkeyOf, type ListedRecord } from './list-records.ts';

/** The most records a listRecords page holds; a page this full may have more after it. */
const PAGE = 100;

/**
 * Above every record key that starts with a prefix: keys use `A-Za-z0-9._:~-`, all below DEL. The
 * reference PDS compares its cursor with keys as text, so it serves as the top of a descending walk.
 */
const TOP = '\x7f';

type Page = { records: ListedRecord[]; cursor?: string };

/**
 * Every record of `collection` whose key starts with `prefix`, in ascending key order, read from
 * both ends at once when there is more than a page: the first page ascending, as a single listing
 * (a repository of up to 100 refs costs one request, as before); when it is full, a descending walk
 * from the top of the range starts beside the ascending one and each stops where it reaches keys
 * the other has read. On the reference PDS at 50 ms RTT this halves a 4,000-ref listing (3.1 s →
 * 1.7 s); more ranges gained nothing more (performance.md, "Many refs").
 *
 * It is no less true than paging one way: each record is read once, as it was at some moment
 * during the listing, which is what a one-way listing gives too (its pages are read one after
 * another, not at one revision). The walks meet without a gap: the ascending walk stops only at a
 * key at or above the lowest one the descending walk has read, and everything from there up was
 * read by it in contiguous pages (and the other way round). A descending page that is not strictly
 * descending below its cursor (a server that ignores the order) stops that walk, and the ascending
 * one reads on alone, so such a server costs the old time, never a missing record.
 */
export async function listKeyRange(
  client: XrpcClient,
  did: string,
  collection: string,
  prefix: string,
): Promise<ListedRecord[]> {
  let pages = 0;
  const page = async (cursor: string, ascending: boolean): Promise<Page> => {
    if (++pages > MAX_PAGES)
      throw new KnotlessError(
        'corrupt-remote',
        `The PDS's listing of ${collection} goes on past ${MAX_PAGES * PAGE} records; stopped reading it.`,
      );
    const answer = await client.query<Page>(
      'com.atproto.repo.listRecords',
      { repo: did, collection, limit: PAGE, ...(ascending ? { reverse: true } : {}), cursor },
      MAX_PAGE_BYTES,
    );
    if (!Array.isArray(answer?.records) || answer.records.some((r) => typeof r?.uri !== 'string'))
      throw new KnotlessError(
        'corrupt-remote',
        `The PDS answered a listing of ${collection} with something that is not one; stopped reading it.`,
      );
    return answer;
  };
  const inRange = (key: string) => key.startsWith(prefix);
  const top = prefix + TOP;

  const up: ListedRecord[] = [];
  const down: ListedRecord[] = [];
  const lastUp = () => (up.length === 0 ? prefix : rkeyOf(up.at(-1)!.uri));
  const lastDown = () => (down.length === 0 ? top : rkeyOf(down.at(-1)!.uri));

  /** Takes an ascending page's records; true when the walk is done. */
  const takeUp = (p: Page, cursor: string): boolean => {
    for (const r of p.records) {
      const key = rkeyOf(r.uri);
      if (!inRange(key)) return true;
      // Read by the descending walk already: from here up, it has everything.
      if (down.length > 0 && key >= lastDown()) return true;
      up.push(r);
    }
    if (p.cursor === undefined || p.records.length < PAGE) return true;
    if (p.cursor === cursor)
      throw new KnotlessError(
        'corrupt-remote',
        `The PDS's listing of ${collection} repeats itself; stopped reading it.`,
      );
    return false;
  };

  let cursor = prefix;
  const first = await page(cursor, true);
  if (takeUp(first, cursor)) return up;
  cursor = first.cursor!;

  const ascending = async (): Promise<void> => {
    for (;;) {
      const p = await page(cursor, true);
      if (takeUp(p, cursor)) return;
      cursor = p.cursor!;
    }
  };
  const descending = async (): Promise<void> => {
    let at = top;
    for (;;) {
      const p = await page(at, false);
      const keys = p.records.map((r) => rkeyOf(r.uri));
      // Checked whole before any of it counts: a server that does not walk downwards (keys not
      // strictly descending below the cursor) ends this walk, and the ascending one reads on alone.
      if (keys.some((k, i) => k >= (i === 0 ? at : keys[i - 1]!))) return;
      for (const [i, r] of p.records.entries()) {
        const key = keys[i]!;
        // Out of the range, or read by the ascending walk already: from here down, it has everything.
        if (!inRange(key) || key <= lastUp()) return;
        down.push(r);
      }
      if (p.cursor === undefined || p.records.length < PAGE || p.cursor === at) return;
      at = p.cursor;
    }
  };
  await Promise.all([ascending(), descending()]);
  return [...up, ...down.reverse()];
}
