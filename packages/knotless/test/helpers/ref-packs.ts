import assert from 'node:assert/strict';
import type { TestNet } from './network.ts';

/** How many packs the record of `ref` of the repository at `url` lists, read from `handle`'s PDS. */
export async function packCount(t: TestNet, handle: string, url: string, ref: string): Promise<number> {
  const name = url.split('/').pop()!;
  const query = new URLSearchParams({
    repo: t.dids[handle]!,
    collection: 'dev.knotless.ref',
    limit: '100',
  });
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.listRecords?${query.toString()}`);
  const { records } = (await res.json()) as {
    records: Array<{ value: { repo: string; ref: string; packs: unknown[] } }>;
  };
  const record = records.find((r) => r.value.repo === name && r.value.ref === ref);
  assert.ok(record !== undefined, `no record of ${ref}`);
  return record.value.packs.length;
}
