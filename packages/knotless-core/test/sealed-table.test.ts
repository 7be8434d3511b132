// A private repository's ref table (format.md, "Private repositories"): laid out as a public one's,
// then the table and each part sealed whole, bound to the repository, the account and the key it is
// written under; nothing of a ref's name or value in the clear, parts keyed by a keyed digest, the
// blobs its packs name referenced, and every record moved, changed or stripped refused.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { jsonToLex, Lexicons } from '@atproto/lexicon';
import { CID } from 'multiformats/cid';
import { create } from 'multiformats/hashes/digest';
import fs from 'node:fs';
import path from 'node:path';
import { isKnotlessError } from '../src/errors.ts';
import { RepoSealer } from '../src/private/sealer.ts';
import { REFS_COLLECTION, REFS_PART_COLLECTION } from '../src/records/collections.ts';
import { recordCid } from '../src/records/proof.ts';
import type { PackEntry } from '../src/records/ref-record.ts';
import {
  applyRefUpdates,
  joinRefTable,
  parseRefTable,
  refTableKey,
  type FetchedPart,
  type RefTable,
  type StoredTable,
} from '../src/records/ref-table.ts';
import type { RemoteRepo } from '../src/records/remote-repo.ts';
import { tableLayout } from '../src/records/table-write.ts';

const OWNER = 'did:plc:owneraaaaaaaaaaaaaaaaaaa';
const BOB = 'did:plc:bobaaaaaaaaaaaaaaaaaaaaa';
const REPO = `at://${OWNER}/dev.knotless.repo/secret`;
const oid = (n: number) => n.toString(16).padStart(40, '0');
const NAME = 'hiddenbranchname';

function blob(n: number): Record<string, unknown> {
  const digest = crypto.createHash('sha256').update(String(n)).digest();
  // A raw-codec CIDv1 of sha2-256, as a PDS names a blob.
  const cid = CID.createV1(0x55, create(0x12, digest)).toString();
  return { $type: 'blob', ref: { $link: cid }, mimeType: 'application/octet-stream', size: 141 };
}

function pack(n: number): PackEntry {
  return {
    id: oid(0xf0000 + n),
    size: 100,
    count: 1,
    parts: [blob(n) as never],
    sealed: { stored: 141, epoch: 0 },
  };
}

function table(n: number, maintainer = false): RefTable {
  const updates = Array.from({ length: n }, (_, i) => ({
    ref: `refs/heads/${NAME}-${String(i).padStart(5, '0')}`,
    target: oid(i + 1),
    packs: [pack(0), pack(i + 1)],
  }));
  return applyRefUpdates(
    undefined,
    updates,
    { repo: REPO, ...(maintainer ? {} : { head: `refs/heads/${NAME}-00000` }), maintainer },
    new Date(),
  );
}

/** The one part a RemoteRepo plays in laying a table out: whose account, and the repository's sealer. */
function holder(did: string, sealer: RepoSealer): RemoteRepo {
  return { owner: { did }, sealer, prepare: () => Promise.resolve() } as unknown as RemoteRepo;
}

async function sealer(ring = { epochs: [crypto.randomBytes(32)] }): Promise<RepoSealer> {
  return RepoSealer.create(OWNER, 'secret', ring);
}

/** What a reader does: open the table and its parts, bound to `account` and their keys, and join them. */
function opened(
  s: RepoSealer,
  account: string,
  key: string,
  written: { table: Record<string, unknown>; parts: { rkey: string; value: Record<string, unknown> }[] },
): { stored: StoredTable; joined: RefTable } {
  const stored = parseRefTable(
    s.openTable(account, REFS_COLLECTION, key, written.table),
    REPO,
    account === OWNER,
  );
  const parts: FetchedPart[] = written.parts.map((p) => ({
    rkey: p.rkey,
    cid: recordCid(p.value),
    value: s.openTable(account, REFS_PART_COLLECTION, p.rkey, p.value),
  }));
  return { stored, joined: joinRefTable(stored, parts) };
}

function refused(fn: () => unknown, words: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isKnotlessError(err, 'corrupt-remote'), String(err));
    assert.match(err.message, /^A ref table of the private repository /);
    assert.match(err.message, words);
    return true;
  });
}

describe("a private repository's ref table", () => {
  const key = refTableKey('secret', OWNER, OWNER);

  it('is sealed whole, parts and all, with nothing of a ref in the clear, and opens to the table written', async () => {
    const s = await sealer();
    const t = table(3000);
    const out = await tableLayout(holder(OWNER, s), t, key);
    assert.ok(out.create.length >= 2, 'a table this large has parts');
    const all = JSON.stringify([out.table, ...out.create.map((p) => p.value)]);
    assert.equal(all.indexOf(NAME), -1, 'no ref name is in the clear');
    assert.equal(all.indexOf(oid(1234)), -1, 'no ref value is in the clear');
    for (const r of [out.table, ...out.create.map((p) => p.value)]) {
      assert.deepEqual(Object.keys(r).sort(), ['$type', 'blobs', 'epoch', 'repo', 'sealed']);
      assert.equal(r['repo'], REPO);
    }
    // A part's key is a keyed digest: the same contents laid out under another ring get another key.
    const other = await tableLayout(holder(OWNER, await sealer()), t, key);
    assert.notDeepEqual(
      other.create.map((p) => p.rkey),
      out.create.map((p) => p.rkey),
    );
    const { joined } = opened(s, OWNER, key, { table: out.table, parts: out.create });
    assert.deepEqual(
      joined.refs.map((r) => [r.ref, r.target]),
      t.refs.map((r) => [r.ref, r.target]),
    );
    // Every blob the sealed packs name is referenced by the record that names it.
    const referenced = new Set(
      out.create.flatMap((p) => (p.value['blobs'] as { ref: { $link: string } }[]).map((b) => b.ref.$link)),
    );
    for (const r of joined.refs)
      for (const p of r.packs) for (const b of p.parts ?? []) assert.ok(referenced.has(b.ref.$link));
    // And the records are what the lexicons say.
    const lex = new Lexicons();
    const dir = path.join(import.meta.dirname, '../../../lexicons/dev/knotless');
    for (const f of ['ref.json', 'refs.json', 'refs/part.json'])
      lex.add(JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as never);
    lex.assertValidRecord(REFS_COLLECTION, jsonToLex(JSON.parse(JSON.stringify(out.table)) as never));
    for (const p of out.create)
      lex.assertValidRecord(REFS_PART_COLLECTION, jsonToLex(JSON.parse(JSON.stringify(p.value)) as never));
  });

  it('keeps the parts a push does not change, under the CIDs the table names, unwritten', async () => {
    const s = await sealer();
    const t = table(3000);
    const first = await tableLayout(holder(OWNER, s), t, key);
    const previous = opened(s, OWNER, key, { table: first.table, parts: first.create });
    // The first 700 branches move, past what overrides hold: the table is laid out again, and the
    // parts after them, unchanged, are kept.
    const next: RefTable = {
      ...t,
      seq: t.seq + 1,
      refs: t.refs.map((r, i) => (i < 700 ? { ...r, target: oid(99_999 + i) } : r)),
    };
    const second = await tableLayout(holder(OWNER, s), next, key, {
      table: previous.stored,
      joined: previous.joined,
    });
    const written = new Map(first.create.map((p) => [p.rkey, p.value]));
    for (const p of second.create) written.set(p.rkey, p.value);
    const again = opened(s, OWNER, key, {
      table: second.table,
      parts: previous.stored.parts
        .map((l) => l.rkey)
        .concat(second.create.map((p) => p.rkey))
        .filter((k, i, a) => a.indexOf(k) === i)
        .map((rkey) => ({ rkey, value: written.get(rkey)! })),
    });
    assert.deepEqual(
      again.joined.refs.map((r) => r.target),
      next.refs.map((r) => r.target),
    );
    const kept = again.stored.parts.filter((l) => !second.create.some((p) => p.rkey === l.rkey));
    assert.ok(kept.length > 0, 'unchanged parts are not written again');
    for (const l of kept)
      assert.equal(
        l.cid,
        previous.stored.parts.find((p) => p.rkey === l.rkey)?.cid,
        'a kept part keeps its CID',
      );
  });

  it("refuses a table opened as another account's, another key's, another part's, or another repository's", async () => {
    const ring = { epochs: [crypto.randomBytes(32)] };
    const s = await sealer(ring);
    const out = await tableLayout(holder(BOB, s), table(3, true), refTableKey('secret', OWNER, BOB));
    const bobKey = refTableKey('secret', OWNER, BOB);
    // Bob's table opens as his, in his account, under his key.
    assert.equal(
      parseRefTable(s.openTable(BOB, REFS_COLLECTION, bobKey, out.table), REPO, false).refs.length,
      3,
    );
    refused(() => s.openTable(OWNER, REFS_COLLECTION, bobKey, out.table), /does not decrypt/);
    refused(() => s.openTable(BOB, REFS_COLLECTION, key, out.table), /does not decrypt/);
    refused(() => s.openTable(BOB, REFS_PART_COLLECTION, bobKey, out.table), /does not decrypt/);
    // The same ring (a fork's, say) opens nothing written for another repository.
    const elsewhere = await RepoSealer.create(OWNER, 'another', ring);
    refused(() => elsewhere.openTable(BOB, REFS_COLLECTION, bobKey, out.table), /does not decrypt/);
  });

  it('refuses a table whose bytes, epoch or blob list were changed', async () => {
    const ring = { epochs: [crypto.randomBytes(32)] };
    const s = await sealer(ring);
    const out = await tableLayout(holder(OWNER, s), table(3), key);
    const bytes = Buffer.from((out.table['sealed'] as { $bytes: string }).$bytes, 'base64');
    bytes[bytes.length - 1]! ^= 1;
    refused(
      () =>
        s.openTable(OWNER, REFS_COLLECTION, key, {
          ...out.table,
          sealed: { $bytes: bytes.toString('base64') },
        }),
      /does not decrypt/,
    );
    refused(
      () => s.openTable(OWNER, REFS_COLLECTION, key, { ...out.table, epoch: 1 }),
      /key epoch this ring lacks/,
    );
    refused(
      () =>
        s.openTable(OWNER, REFS_COLLECTION, key, {
          ...out.table,
          blobs: (out.table['blobs'] as unknown[]).slice(1),
        }),
      /lists blobs it does not reference/,
    );
    refused(
      () => s.openTable(OWNER, REFS_COLLECTION, key, { repo: REPO, epoch: 0 }),
      /holds no sealed contents/,
    );
    // A newer epoch's table opens with a ring that has it, and its packs get the key that opens them.
    const rotated = await sealer({ epochs: [ring.epochs[0]!, crypto.randomBytes(32)] });
    const newer = await tableLayout(holder(OWNER, rotated), table(3), key);
    assert.equal(newer.table['epoch'], 1);
    refused(() => s.openTable(OWNER, REFS_COLLECTION, key, newer.table), /key epoch this ring lacks/);
    const { joined } = opened(rotated, OWNER, key, { table: newer.table, parts: [] });
    for (const r of joined.refs) rotated.attachPacks(r.packs);
    assert.ok(joined.refs.every((r) => r.packs.every((p) => typeof p.decrypt === 'function')));
  });
});
