// A test's hands on an account's ref tables: records put straight into the account, a table written
// as the core lays it out (to start a repository on one), and the owner's table read back as stored.
import assert from 'node:assert/strict';
import { jsonToLex } from '@atproto/lexicon';
import { cidForRecord } from '@atproto/repo';
import { parseRefRecord, type RefRecord } from 'knotless-core/records/ref-record';
import {
  applyRefUpdates,
  joinRefTable,
  layoutRefTable,
  parseRefTable,
  refTableKey,
  type RefUpdate,
} from 'knotless-core/records/ref-table';
import type { TestNet } from './network.ts';

/** What a test does with `handle`'s records. */
export interface TableHands {
  /** Puts a record straight into the account; returns its CID as the PDS computed it. */
  put: (collection: string, rkey: string, record: Record<string, unknown>) => Promise<string>;
  /** The repository's ref records as the PDS holds them, by ref name. */
  refRecords: (name: string) => Promise<Map<string, RefRecord>>;
  /**
   * Writes the owner's table of `name` holding `updates`, laid out as the core lays it out, listing
   * `maintainers` (DIDs) when given; with `over` (the table as stored), the refs it holds are kept
   * and `updates` applied to them.
   */
  writeTable: (
    name: string,
    updates: RefUpdate[],
    maintainers?: string[],
    over?: StoredJson,
  ) => Promise<void>;
  /**
   * Writes this account's table of `owner`'s (a DID) repository `name`, as a maintainer's, under the
   * key format.md gives it (`name~<owner DID>`); `repo` overrides the repository it names.
   */
  writeMemberTable: (owner: string, name: string, updates: RefUpdate[], repo?: string) => Promise<void>;
  /** The owner's table of `name` as stored (undefined when there is none), with its CID. */
  readTable: (name: string) => Promise<{ cid: string; value: StoredJson } | undefined>;
}

/** A table record's JSON, as far as tests look into it. */
export interface StoredJson {
  head?: string;
  seq: number;
  packs: { id: string }[];
  refs: { ref: string; target?: string; packs?: number[] }[];
  parts?: { rkey: string }[];
  maintainers?: { did: string; since: string }[];
}

export function tableHands(t: TestNet, handle: string): TableHands {
  const did = () => t.dids[handle]!;
  // The account's own PDS: a network of two spreads accounts over both.
  const pds = () => t.pdsOf[handle] ?? t.net.pdsUrl;
  const cidOf = async (value: Record<string, unknown>) =>
    (await cidForRecord(jsonToLex(value) as Parameters<typeof cidForRecord>[0])).toString();
  const session = async (): Promise<{ accessJwt: string }> => {
    const res = await fetch(`${pds()}/xrpc/com.atproto.server.createSession`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ identifier: handle, password: t.password }),
    });
    return (await res.json()) as { accessJwt: string };
  };
  const put = async (collection: string, rkey: string, record: Record<string, unknown>) => {
    const s = await session();
    const res = await fetch(`${pds()}/xrpc/com.atproto.repo.putRecord`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.accessJwt}` },
      body: JSON.stringify({ repo: did(), collection, rkey, record, validate: false }),
    });
    const body = (await res.json()) as { cid: string };
    assert.equal(res.status, 200, JSON.stringify(body));
    return body.cid;
  };
  return {
    put,
    refRecords: async (name) => {
      const url = new URL('/xrpc/com.atproto.repo.listRecords', pds());
      url.searchParams.set('repo', did());
      url.searchParams.set('collection', 'dev.knotless.ref');
      url.searchParams.set('limit', '100');
      const body = (await (await fetch(url)).json()) as { records: { value: unknown }[] };
      const out = new Map<string, RefRecord>();
      for (const r of body.records) {
        const rec = parseRefRecord(r.value);
        if (rec.repo === name) out.set(rec.ref, rec);
      }
      return out;
    },
    writeMemberTable: async (owner, name, updates, repo) => {
      const table = applyRefUpdates(
        undefined,
        updates,
        { repo: repo ?? `at://${owner}/dev.knotless.repo/${name}`, maintainer: true },
        new Date(),
      );
      const key = refTableKey(name, owner, did());
      const writes = await layoutRefTable(table, key, cidOf);
      assert.equal(writes.create.length, 0, 'a maintainer table small enough for one record');
      await put('dev.knotless.refs', key, writes.table);
    },
    writeTable: async (name, updates, maintainers, over) => {
      const repo = `at://${did()}/dev.knotless.repo/${name}`;
      const table = applyRefUpdates(
        over === undefined ? undefined : joinRefTable(parseRefTable(over, repo, true), []),
        updates,
        { repo, head: 'refs/heads/main', maintainer: false },
        new Date(),
      );
      const since = new Date().toISOString();
      if (maintainers !== undefined) table.maintainers = maintainers.map((m) => ({ did: m, since }));
      const writes = await layoutRefTable(table, name, cidOf);
      // Parts first, as a writer writes them; each must be stored under the CID the table names.
      for (const part of writes.create)
        assert.equal(
          await put('dev.knotless.refs.part', part.rkey, part.value),
          (writes.table['parts'] as { rkey: string; cid: string }[]).find((p) => p.rkey === part.rkey)!.cid,
        );
      await put('dev.knotless.refs', name, writes.table);
    },
    readTable: async (name) => {
      const url = new URL('/xrpc/com.atproto.repo.getRecord', pds());
      url.searchParams.set('repo', did());
      url.searchParams.set('collection', 'dev.knotless.refs');
      url.searchParams.set('rkey', name);
      const res = await fetch(url);
      if (res.status === 400 || res.status === 404) return undefined;
      assert.equal(res.status, 200);
      return (await res.json()) as { cid: string; value: StoredJson };
    },
  };
}

/** `git ls-remote`'s output as ref name → object id. */
export function lsRemote(out: string): Map<string, string> {
  return new Map(
    out
      .trim()
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        const [oid, ref] = l.split('\t');
        return [ref!, oid!];
      }),
  );
}
