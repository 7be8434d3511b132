import type { XrpcClient } from '../xrpc/client.ts';

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
  for (;;) {
    const page = await client.query<{ records: ListedRecord[]; cursor?: string }>(
      'com.atproto.repo.listRecords',
      {
        repo: did,
        collection,
        limit: 100,
        reverse: true,
        cursor,
      },
    );
    for (const r of page.records) {
      if (opts.keep !== undefined && !opts.keep(rkeyOf(r.uri))) return;
      yield r;
    }
    if (page.cursor === undefined || page.records.length < 100) return;
    cursor = page.cursor;
  }
}
