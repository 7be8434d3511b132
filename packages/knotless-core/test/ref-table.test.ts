// The ref table (format.md, "The ref table"): its keys, reading a record, applying a push, and laying
// a large table out in parts; hostile records are refused whole.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonToLex } from '@atproto/lexicon';
import { cidForRecord } from '@atproto/repo';
import { isKnotlessError } from '../src/errors.ts';
import type { PackEntry } from '../src/records/ref-record.ts';
import {
  applyRefUpdates,
  joinRefTable,
  layoutRefTable,
  MAX_TABLE_BYTES,
  parseRefTable,
  refTableKey,
  type FetchedPart,
  type RefTable,
} from '../src/records/ref-table.ts';

const OWNER = 'did:plc:owneraaaaaaaaaaaaaaaaaaa';
const ANN = 'did:plc:annaaaaaaaaaaaaaaaaaaaaa';
const REPO = `at://${OWNER}/dev.knotless.repo/project`;
const oid = (n: number) => n.toString(16).padStart(40, '0');
const NOW = new Date('2026-01-02T03:04:05.000Z');

function pack(n: number, size = 64): PackEntry {
  return { id: oid(0xf0000 + n), size, count: 1, inline: new Uint8Array(size) };
}

/** A part's record CID as a PDS computes it (CIDv1, DAG-CBOR, sha2-256), by the PDS's own library. */
async function cidOf(value: Record<string, unknown>): Promise<string> {
  return (await cidForRecord(jsonToLex(value) as never)).toString();
}

/** A table with `n` branches sharing one base pack, each with a pack of its own. */
function bigTable(n: number): RefTable {
  const updates = Array.from({ length: n }, (_, i) => ({
    ref: `refs/heads/branch-${String(i).padStart(5, '0')}`,
    target: oid(i + 1),
    packs: [pack(0), pack(i + 1)],
  }));
  return applyRefUpdates(
    undefined,
    updates,
    { repo: REPO, head: 'refs/heads/branch-00000', maintainer: false },
    NOW,
  );
}

function refused(fn: () => unknown, words: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(isKnotlessError(err, 'corrupt-remote'), String(err));
    assert.match(err.message, words);
    assert.match(err.message, /^The ref table of at:\/\/did:plc:owner/);
    return true;
  });
}

/** The written form of a small owner's table, for tampering with. */
async function written(): Promise<Record<string, unknown>> {
  const t = applyRefUpdates(
    undefined,
    [
      { ref: 'refs/heads/main', target: oid(1), packs: [pack(1)] },
      { ref: 'refs/heads/topic', target: oid(2), packs: [pack(1), pack(2)] },
    ],
    { repo: REPO, head: 'refs/heads/main', maintainer: false },
    NOW,
  );
  return structuredClone((await layoutRefTable(t, 'project', cidOf)).table);
}

describe('the ref table', () => {
  it("is keyed by the repository for its owner, by the owner's DID (or its hash) for a maintainer", () => {
    assert.equal(refTableKey('project', OWNER, OWNER), 'project');
    assert.equal(refTableKey('project', OWNER, ANN), `project~${OWNER}`);
    assert.match(refTableKey('project', 'did:web:ex.com%3A8080', ANN), /^project~~[0-9a-f]{32}$/);
    const long = `did:web:${'a'.repeat(600)}`;
    assert.match(refTableKey('project', long, ANN), /^project~~[0-9a-f]{32}$/);
  });

  it('round-trips a push: entries sorted by their bytes, each pack once, seq one more', async () => {
    const first = applyRefUpdates(
      undefined,
      [
        { ref: 'refs/heads/zeta', target: oid(3), packs: [pack(1), pack(3)] },
        { ref: 'refs/heads/\u00e9t\u00e9', target: oid(4), packs: [pack(1)] },
        { ref: 'refs/heads/main', target: oid(1), packs: [pack(1)] },
        { ref: 'refs/tags/v1', target: oid(5), peeled: oid(1), packs: [pack(1)] },
      ],
      { repo: REPO, head: 'refs/heads/main', maintainer: false },
      NOW,
    );
    assert.equal(first.seq, 0);
    const out = await layoutRefTable(first, 'project', cidOf);
    assert.deepEqual(out.create, []);
    const rec = out.table as { packs: { id: string }[]; refs: { ref: string; packs: number[] }[] };
    assert.deepEqual(
      rec.packs.map((p) => p.id),
      [pack(1).id, pack(3).id],
    );
    // UTF-8 byte order puts "é" (0xC3…) after "z"; UTF-16 order would too, but after every ASCII name.
    assert.deepEqual(
      rec.refs.map((r) => r.ref),
      ['refs/heads/main', 'refs/heads/zeta', 'refs/heads/\u00e9t\u00e9', 'refs/tags/v1'],
    );
    const back = joinRefTable(parseRefTable(JSON.parse(JSON.stringify(out.table)), REPO, true), []);
    assert.equal(back.head, 'refs/heads/main');
    assert.deepEqual(
      back.refs.map((r) => [r.ref, r.target, r.peeled, r.packs.map((p) => p.id)]),
      first.refs.map((r) => [r.ref, r.target, r.peeled, r.packs.map((p) => p.id)]),
    );

    const second = applyRefUpdates(
      back,
      [{ ref: 'refs/heads/zeta' }, { ref: 'refs/heads/main', target: oid(9), packs: [pack(1), pack(9)] }],
      { repo: REPO, maintainer: false },
      NOW,
    );
    assert.equal(second.seq, 1);
    assert.deepEqual(
      second.refs.map((r) => r.ref),
      ['refs/heads/main', 'refs/heads/\u00e9t\u00e9', 'refs/tags/v1'],
    );
    const rec2 = (await layoutRefTable(second, 'project', cidOf)).table as { packs: { id: string }[] };
    // The pack only the deleted ref listed is gone from the table.
    assert.deepEqual(
      rec2.packs.map((p) => p.id),
      [pack(1).id, pack(9).id],
    );
  });

  it("leaves a tombstone only in a maintainer's table, where a deletion replaced a value", () => {
    const base = applyRefUpdates(
      undefined,
      [{ ref: 'refs/heads/a', target: oid(1) }],
      { repo: REPO, maintainer: true },
      NOW,
    );
    const t = applyRefUpdates(
      base,
      [{ ref: 'refs/heads/a', over: [{ did: OWNER, target: oid(1) }] }],
      { repo: REPO, maintainer: true },
      NOW,
    );
    assert.deepEqual(t.refs, [
      { ref: 'refs/heads/a', packs: [], deleted: true, over: [{ did: OWNER, target: oid(1) }] },
    ]);
  });

  it('keeps a table over 256 KiB in parts, each at most 256 KiB, and joins them back', async () => {
    const t = bigTable(3000);
    const out = await layoutRefTable(t, 'project', cidOf);
    assert.ok(out.create.length >= 2, `${out.create.length} parts`);
    for (const p of out.create) assert.ok(Buffer.byteLength(JSON.stringify(p.value)) <= MAX_TABLE_BYTES);
    assert.ok(Buffer.byteLength(JSON.stringify(out.table)) <= MAX_TABLE_BYTES);
    const parts: FetchedPart[] = await Promise.all(
      out.create.map(async (p) => ({
        rkey: p.rkey,
        cid: await cidOf(p.value),
        value: JSON.parse(JSON.stringify(p.value)) as unknown,
      })),
    );
    for (const p of parts) assert.match(p.rkey, /^project~[0-9a-f]{32}$/);
    const stored = parseRefTable(JSON.parse(JSON.stringify(out.table)), REPO, true);
    const joined = joinRefTable(stored, parts);
    assert.equal(joined.refs.length, 3000);
    assert.deepEqual(
      joined.refs.map((r) => r.ref),
      t.refs.map((r) => r.ref),
    );
    assert.deepEqual(
      joined.refs[2999]!.packs.map((p) => p.id),
      [pack(0).id, pack(3000).id],
    );

    // A push of one branch to the large table is one write of the table: an override, a gone ref.
    const next = applyRefUpdates(
      joined,
      [
        { ref: 'refs/heads/branch-00007', target: oid(77777), packs: [pack(0), pack(77777)] },
        { ref: 'refs/heads/branch-00008' },
      ],
      { repo: REPO, maintainer: false },
      NOW,
    );
    const push = await layoutRefTable(next, 'project', cidOf, { table: stored, joined });
    assert.deepEqual(push.create, []);
    assert.deepEqual(push.remove, []);
    const rec = push.table as { refs: { ref: string }[]; gone: string[]; parts: unknown[] };
    assert.deepEqual(
      rec.refs.map((r) => r.ref),
      ['refs/heads/branch-00007'],
    );
    assert.deepEqual(rec.gone, ['refs/heads/branch-00008']);
    const again = joinRefTable(parseRefTable(JSON.parse(JSON.stringify(push.table)), REPO, true), parts);
    assert.equal(again.refs.length, 2999);
    assert.equal(again.refs.find((r) => r.ref === 'refs/heads/branch-00007')?.target, oid(77777));
    assert.equal(
      again.refs.find((r) => r.ref === 'refs/heads/branch-00008'),
      undefined,
    );
    assert.equal(again.seq, 1);
  });

  it('repacks when the overrides pass 64 KiB, writing only the parts that changed', async () => {
    const t = bigTable(3000);
    const out = await layoutRefTable(t, 'project', cidOf);
    const parts = await Promise.all(
      out.create.map(async (p) => ({ rkey: p.rkey, cid: await cidOf(p.value), value: p.value })),
    );
    const stored = parseRefTable(JSON.parse(JSON.stringify(out.table)), REPO, true);
    const joined = joinRefTable(stored, parts);
    // Rewrite the last 1000 branches: far more than 64 KiB of overrides, all in the last parts.
    const updates = joined.refs
      .slice(2000)
      .map((r, i) => ({ ref: r.ref, target: oid(50000 + i), packs: [pack(0)] }));
    const next = applyRefUpdates(joined, updates, { repo: REPO, maintainer: false }, NOW);
    const push = await layoutRefTable(next, 'project', cidOf, { table: stored, joined });
    const rec = push.table as { refs: unknown[]; parts: { rkey: string }[] };
    assert.deepEqual(rec.refs, []);
    assert.ok(push.create.length >= 1);
    assert.ok(push.create.length < rec.parts.length, 'unchanged runs keep their parts');
    assert.ok(push.remove.length >= 1);
    for (const k of push.remove) assert.ok(!rec.parts.some((p) => p.rkey === k));
  });

  it('refuses duplicate names, unsorted entries, and pack indices outside the table', async () => {
    const dup = await written();
    (dup['refs'] as unknown[]).push((dup['refs'] as unknown[])[1]);
    refused(() => parseRefTable(dup, REPO, true), /refs\/heads\/topic" is listed twice/);

    const unsorted = await written();
    (unsorted['refs'] as unknown[]).reverse();
    refused(() => parseRefTable(unsorted, REPO, true), /not sorted/);

    for (const bad of [2, -1, 1.5, '0']) {
      const rec = await written();
      (rec['refs'] as { packs: unknown[] }[])[1]!.packs = [0, bad];
      refused(() => parseRefTable(rec, REPO, true), /lists a pack the table does not have/);
    }
    const twice = await written();
    (twice['packs'] as unknown[]).push((twice['packs'] as unknown[])[0]);
    refused(() => parseRefTable(twice, REPO, true), /listed twice/);
  });

  it("refuses another repository's table, bad names, a maintainer's fields in the wrong table", async () => {
    const w = await written();
    refused(
      () => parseRefTable({ ...w, repo: `at://${ANN}/dev.knotless.repo/project` }, REPO, true),
      /another repository/,
    );
    const badName = await written();
    (badName['refs'] as { ref: string }[])[0]!.ref = 'refs/heads/a\u202eb';
    refused(() => parseRefTable(badName, REPO, true), /no valid ref/);
    const noTarget = await written();
    (noTarget['refs'] as { target: string }[])[0]!.target = 'xyz';
    refused(() => parseRefTable(noTarget, REPO, true), /no valid target/);
    refused(() => parseRefTable(w, REPO, false), /default branch, which only the owner/);
    const tomb = await written();
    (tomb['refs'] as unknown[])[0] = { ref: 'refs/heads/main', deleted: true, over: [{ did: ANN }] };
    refused(() => parseRefTable(tomb, REPO, true), /tombstone, which only a maintainer/);
    refused(() => parseRefTable({ ...w, seq: -1 }, REPO, true), /seq/);
    refused(() => parseRefTable({ ...w, packs: 'x' }, REPO, true), /pack table is not a list/);
    refused(() => parseRefTable({ ...w, gone: ['refs/heads/x'] }, REPO, true), /gone refs but no parts/);
  });

  it("names each part by the CID atproto's own code gives its record, blob references and all", async () => {
    const { recordCid } = await import('../src/records/proof.ts');
    const out = await layoutRefTable(bigTable(3000), 'project', async (v) => Promise.resolve(recordCid(v)));
    assert.ok(out.create.length >= 2);
    for (const p of out.create) assert.equal(recordCid(p.value), await cidOf(p.value));
    assert.equal(recordCid(out.table), await cidOf(out.table));
  });

  it('refuses a part whose contents do not match the CID the table names, or lie about its range', async () => {
    const out = await layoutRefTable(bigTable(3000), 'project', cidOf);
    const stored = parseRefTable(JSON.parse(JSON.stringify(out.table)), REPO, true);
    const honest = await Promise.all(
      out.create.map(async (p) => ({
        rkey: p.rkey,
        cid: await cidOf(p.value),
        value: structuredClone(p.value),
      })),
    );
    // A proxy drops one branch from the first part: its contents, hence its CID, change.
    const stripped = structuredClone(honest[0]!.value) as { refs: unknown[] };
    stripped.refs.splice(5, 1);
    const forged = [{ ...honest[0]!, value: stripped, cid: await cidOf(stripped) }, ...honest.slice(1)];
    refused(() => joinRefTable(stored, forged), /not the one the table names/);
    refused(() => joinRefTable(stored, honest.slice(1)), /is missing/);
    // A part that is the one named but holds another count than the table says (a forged table).
    const lying = structuredClone(JSON.parse(JSON.stringify(out.table)) as { parts: { count: number }[] });
    lying.parts[0]!.count += 1;
    refused(() => joinRefTable(parseRefTable(lying, REPO, true), honest), /another number of refs/);
    const overlap = structuredClone(JSON.parse(JSON.stringify(out.table)) as { parts: { first: string }[] });
    overlap.parts[1]!.first = 'refs/heads/branch-00000';
    refused(() => parseRefTable(overlap, REPO, true), /overlap/);
  });
});
