import { KnotlessError } from '../errors.ts';
import type { XrpcClient } from '../xrpc/client.ts';

/** Pages one listing may take (500,000 records): a PDS whose listing never ends cannot hang us. */
export const MAX_PAGES = 5000;
/**
 * Cap on one page's answer: 100 records averaging 160 KiB, far above the few KiB a ref record has,
 * so that a hostile PDS cannot make a page cost more memory than this.
 */
export const MAX_PAGE_BYTES = 16 * 1024 * 1024;

/** One record as com.atproto.repo.listRecords returns it. */
export interface ListedRecord {
  uri: string;
  cid: string;
  value: unknown;
}

/** The record key at the end of an at:// URI. */
export function rkeyOf(uri: string): string {
  return uri.slice(uri.lastIndexOf('/') + 1);
}

/**
 * Pages through a collection in ascending key order, starting after `after` and stopping at the
 * first key `keep` rejects; 100 records a page, the most the PDS gives.
 */
export async function* listRecords(
  client: XrpcClient,
  did: string,
  collection: string,
  opts: { after?: string; keep?: (rkey: string) => boolean } = {},
): AsyncGenerator<ListedRecord> {
  let cursor = opts.after;
  for (let n = 1; ; n++) {
    const page = await client.query<{ records: ListedRecord[]; cursor?: string }>(
      'com.atproto.repo.listRecords',
      {
        repo: did,
        collection,
        limit: 100,
        reverse: true,
        cursor,
      },
      MAX_PAGE_BYTES,
    );
    if (!Array.isArray(page?.records) || page.records.some((r) => typeof r?.uri !== 'string'))
      throw new KnotlessError(
        'corrupt-remote',
        `The PDS answered a listing of ${collection} with something that is not one; stopped reading it.`,
      );
    for (const r of page.records) {
      if (opts.keep !== undefined && !opts.keep(rkeyOf(r.uri))) return;
      yield r;
    }
    if (page.cursor === undefined || page.records.length < 100) return;
    if (page.cursor === cursor || n >= MAX_PAGES) {
      throw new KnotlessError(
        'corrupt-remote',
        `The PDS's listing of ${collection} ${page.cursor === cursor ? 'repeats itself' : `goes on past ${MAX_PAGES * 100} records`}; stopped reading it.`,
      );
    }
    cursor = page.cursor;
  }
}
