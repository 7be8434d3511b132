import assert from 'node:assert/strict';
import type { TestNet } from './network.ts';

/** A pack as a ref record or a ref table's pack table stores it, as far as tests look into it. */
export interface StoredPack {
  id: string;
  size: number;
  holds?: string;
  parts?: Array<{ ref: { $link: string } }>;
}

/**
 * The pack list of `ref` of `handle`'s repository `name`, read straight from the account's PDS: from
 * its ref table when it has one (where a repository starts, by default), the entry's indices into the
 * table's pack table; else from the ref's dev.knotless.ref record.
 */
export async function storedPacks(
  t: TestNet,
  handle: string,
  name: string,
  ref: string,
): Promise<StoredPack[]> {
  const pds = t.pdsOf[handle] ?? t.net.pdsUrl;
  const did = t.dids[handle]!;
  const got = await fetch(
    `${pds}/xrpc/com.atproto.repo.getRecord?${new URLSearchParams({ repo: did, collection: 'dev.knotless.refs', rkey: name }).toString()}`,
  );
  if (got.status === 200) {
    const { value } = (await got.json()) as {
      value: { packs: StoredPack[]; refs: Array<{ ref: string; packs?: number[] }>; parts?: unknown[] };
    };
    assert.equal(value.parts, undefined, `the table of ${name} is small enough for one record`);
    const entry = value.refs.find((r) => r.ref === ref);
    assert.ok(entry !== undefined, `no entry for ${ref} in the table of ${name}`);
    return (entry.packs ?? []).map((i) => value.packs[i]!);
  }
  assert.ok(got.status === 400 || got.status === 404, `reading the table of ${name}: ${got.status}`);
  const query = new URLSearchParams({ repo: did, collection: 'dev.knotless.ref', limit: '100' });
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.listRecords?${query.toString()}`);
  const { records } = (await res.json()) as {
    records: Array<{ value: { repo: string; ref: string; packs: StoredPack[] } }>;
  };
  const record = records.find((r) => r.value.repo === name && r.value.ref === ref);
  assert.ok(record !== undefined, `no record of ${ref} of ${name}`);
  return record.value.packs;
}

/** How many packs `ref` of the repository at `url` lists, read from `handle`'s PDS (its table, or its ref's record). */
export async function packCount(t: TestNet, handle: string, url: string, ref: string): Promise<number> {
  return (await storedPacks(t, handle, url.split('/').pop()!, ref)).length;
}

/**
 * Which layout `handle`'s repository `name` is on, read straight from the account's PDS: `table` when
 * it holds the repository's ref table, else `records`. A case that runs on one layout checks it with
 * this, so that it cannot pass on the other.
 */
export async function layoutOf(t: TestNet, handle: string, name: string): Promise<'table' | 'records'> {
  const pds = t.pdsOf[handle] ?? t.net.pdsUrl;
  const query = new URLSearchParams({ repo: t.dids[handle]!, collection: 'dev.knotless.refs', rkey: name });
  const res = await fetch(`${pds}/xrpc/com.atproto.repo.getRecord?${query.toString()}`);
  const text = await res.text();
  if (res.ok) return 'table';
  assert.match(text, /RecordNotFound/, `reading the table of ${name}: ${res.status} ${text}`);
  return 'records';
}
