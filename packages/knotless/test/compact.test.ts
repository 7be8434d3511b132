import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { foldStart } from 'knotless-core/packs/fold';
import { compactionDue, planMerge } from 'knotless-core/packs/geometric';
import type { PackEntry } from 'knotless-core/records/ref-record';
import { compactionsDone } from './helpers/compacting.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { storedPacks } from './helpers/ref-packs.ts';

const t = useNetwork(['alice.test']);
let autoCompact = false;
/** Set while a test makes and pushes a repository on ref records (the default is its ref table). */
let records = false;
const alice = useGitUser(t, 'alice.test', () => ({
  ...(autoCompact ? {} : { KNOTLESS_COMPACT: '0' }),
  ...(records ? { KNOTLESS_REF_TABLE: '0' } : {}),
}));

const packs = (...sizes: number[]): PackEntry[] =>
  sizes.map((size, i) => ({ id: String(i).padStart(40, '0'), size, count: 1 }));

/** A ref record of alice's, as the PDS answers getRecord (CID and JSON value). */
async function refRecord<V>(repo: string, ref: string): Promise<{ cid: string; value: V }> {
  const key = `${repo}~${ref.replaceAll('/', '_')}`;
  const res = await fetch(
    `${t.net.pdsUrl}/xrpc/com.atproto.repo.getRecord?repo=${t.dids['alice.test']}&collection=dev.knotless.ref&rkey=${key}`,
  );
  return (await res.json()) as { cid: string; value: V };
}

/** The packs of a ref (size and what each holds), read straight from the PDS: its table's entry, or its record. */
async function packList(repo: string, ref: string): Promise<PackEntry[]> {
  // Stored, `holds` is the kind's name (format.md, "Structure apart from blobs").
  const stored = await storedPacks(t, 'alice.test', repo, ref);
  return stored.map((p, i) => ({
    id: String(i).padStart(40, '0'),
    size: p.size,
    count: 1,
    ...(p.holds === undefined ? {} : { holds: { kind: p.holds as 'structure' | 'blobs' } }),
  }));
}

/** How many packs of each kind a list holds: `structure`, `blobs`, and `mixed` (no `holds`). */
function kinds(list: PackEntry[]): Record<string, number> {
  const n: Record<string, number> = {};
  for (const p of list) n[p.holds?.kind ?? 'mixed'] = (n[p.holds?.kind ?? 'mixed'] ?? 0) + 1;
  return n;
}

async function pushMany(repo: string, n: number): Promise<string> {
  assert.equal((await alice.knotless('repo', 'create', repo)).code, 0);
  const dir = await newRepo(alice, `knotless://alice.test/${repo}`);
  for (let i = 0; i < n; i++) {
    await commitFiles(alice, dir, { [`f${i % 7}.txt`]: `change ${i}\n`.repeat(1 + (i % 5)) }, `c${i}`);
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
  }
  return dir;
}

async function cloneAndCheck(repo: string, commits: number): Promise<void> {
  const out = alice.dir();
  await alice.ok(out, 'clone', '-q', `knotless://alice.test/${repo}`, 'c');
  const fsck = await alice.git(`${out}/c`, 'fsck', '--full');
  assert.equal(fsck.code, 0, fsck.stderr);
  assert.equal((await alice.ok(`${out}/c`, 'rev-list', '--count', 'HEAD')).trim(), String(commits));
}

describe('compaction', () => {
  it('plans geometric merges that keep large shared packs', () => {
    assert.equal(planMerge(packs(1000, 300, 100)), undefined);
    assert.equal(planMerge(packs(2000, 300, 300)), 1);
    assert.equal(planMerge(packs(1000, 400, 150)), 0);
    assert.equal(planMerge(packs(100, 100, 100, 100)), 0);
    assert.equal(planMerge(packs(10_000_000, 500, 300, 200)), 1);
    assert.equal(planMerge(packs(5)), undefined);
    assert.equal(planMerge([]), undefined);
  });

  it('folds only inline packs into a write, and wants a compaction of its own only far past logarithmic', () => {
    const inline = (...sizes: number[]) =>
      packs(...sizes).map((p) => ({ ...p, inline: new Uint8Array(p.size) }));
    // The whole list wants merging, but the blob pack in the middle stays: only what follows it folds.
    assert.equal(foldStart([...inline(100), ...packs(90), ...inline(80, 70)]), 2);
    assert.equal(foldStart(inline(2000, 300, 300)), 1);
    assert.equal(foldStart([...inline(100), ...packs(100), ...inline(100)]), undefined);
    assert.equal(foldStart(inline(1000, 300, 100)), undefined);
    // Equal blob packs: 6 is within twice what a geometric list of these sizes holds (3), 7 is past it.
    assert.equal(compactionDue(packs(...Array<number>(6).fill(20_000))), false);
    assert.equal(compactionDue(packs(...Array<number>(7).fill(20_000))), true);
    assert.equal(compactionDue(packs(1000, 300, 100)), false);
    // A split list is judged kind by kind: N pushes of a small structure pack and a blob pack each are
    // due when N unsplit packs would be (past their interleaving, which alone is twice as long).
    const pushes = (n: number): PackEntry[] =>
      packs(
        ...Array<number>(n)
          .fill(0)
          .flatMap(() => [300, 20_000]),
      ).map((p, i) => ({
        ...p,
        holds: { kind: i % 2 === 0 ? 'structure' : 'blobs' },
      }));
    assert.equal(compactionDue(pushes(6)), false);
    assert.equal(compactionDue(pushes(7)), true);
    // A pack of one large blob that deflated small travels inline, but no fold reaches back past it:
    // merged, its blob would no longer be one a blob:limit clone can skip.
    const large: PackEntry = {
      ...inline(200)[0]!,
      holds: { kind: 'blob', oid: 'a'.repeat(40), blobSize: 2 * 1024 * 1024 },
    };
    const split = (...sizes: number[]): PackEntry[] =>
      inline(...sizes).map((p, i) => ({ ...p, holds: { kind: i % 2 === 0 ? 'structure' : 'blobs' } }));
    assert.equal(foldStart([...split(300, 300), large, ...split(300, 300)]), 3);
    assert.equal(foldStart([...split(300, 300, 300, 300), large]), undefined);
  });

  it('after 50 small pushes, `repo compact` leaves at most log2(50)+2 packs and a sound clone', async () => {
    await pushMany('fifty', 50);
    // Each push changed a file: its commit and tree in one pack, the new blob in another.
    assert.deepEqual(kinds(await packList('fifty', 'refs/heads/main')), { structure: 50, blobs: 50 });
    const res = await alice.knotless('repo', 'compact', 'fifty');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /refs\/heads\/main: 100 packs → \d+/);
    const after = await packList('fifty', 'refs/heads/main');
    // The merge keeps the kinds apart, each list logarithmic on its own.
    const left = kinds(after);
    assert.deepEqual(Object.keys(left).sort(), ['blobs', 'structure']);
    for (const [kind, n] of Object.entries(left))
      assert.ok(n <= Math.log2(50) + 2, `still ${n} ${kind} packs`);
    assert.equal(planMerge(after), undefined);
    await cloneAndCheck('fifty', 50);
    const again = await alice.knotless('repo', 'compact', 'fifty');
    assert.match(again.stderr, /Nothing to compact/);
  });

  it("keeps the pack list geometric by itself after small pushes, merging in each push's own write", async () => {
    autoCompact = true;
    try {
      await pushMany('auto', 16);
      // Nothing runs in the background: each push left a geometric list.
      assert.equal(await compactionsDone(alice), 0);
      const list = await packList('auto', 'refs/heads/main');
      const sizes = list.map((p) => p.size);
      assert.equal(planMerge(list), undefined, `not compacted: ${sizes.join(', ')}`);
      // The folds kept the kinds apart: no pack that holds both, each kind logarithmic on its own.
      const left = kinds(list);
      assert.equal(left['mixed'], undefined, JSON.stringify(left));
      for (const [kind, n] of Object.entries(left))
        assert.ok(n <= Math.log2(16) + 2, `still ${n} ${kind} packs`);
    } finally {
      autoCompact = false;
    }
    await cloneAndCheck('auto', 16);
  });

  it('moves inline packs into blobs when a record holds more inline bytes than a push writes', async () => {
    // Two pushes of incompressible files: the first pack is too large to go inline. Then the record
    // is rewritten, as another client might write it, with both packs inline (over 32 KiB). A
    // repository on ref records (KNOTLESS_REF_TABLE=0): the record is what this test rewrites.
    records = true;
    try {
      assert.equal((await alice.knotless('repo', 'create', 'hoist')).code, 0);
      const dir = await newRepo(alice, 'knotless://alice.test/hoist');
      for (const [i, size] of [24_000, 10_000].entries()) {
        await commitFiles(alice, dir, { [`r${i}`]: crypto.randomBytes(size).toString('latin1') }, `r${i}`);
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
      }
    } finally {
      records = false;
    }
    const pds = t.net.pdsUrl;
    const did = t.dids['alice.test']!;
    const rkey = 'hoist~refs_heads_main';
    const got = await refRecord<{ packs: Array<Record<string, unknown>> }>('hoist', 'refs/heads/main');
    const packsInline = [];
    for (const p of got.value.packs) {
      const parts = p['parts'] as Array<{ ref: { $link: string } }> | undefined;
      if (parts === undefined) {
        packsInline.push(p);
        continue;
      }
      const bytes = [];
      for (const part of parts) {
        const res = await fetch(`${pds}/xrpc/com.atproto.sync.getBlob?did=${did}&cid=${part.ref.$link}`);
        bytes.push(Buffer.from(await res.arrayBuffer()));
      }
      const { parts: _, ...rest } = p;
      packsInline.push({ ...rest, inline: { $bytes: Buffer.concat(bytes).toString('base64') } });
    }
    const inlineBefore = packsInline.reduce(
      (n, p) => n + Buffer.from((p['inline'] as { $bytes: string }).$bytes, 'base64').length,
      0,
    );
    assert.ok(inlineBefore > 32 * 1024, `the setup holds only ${inlineBefore} inline bytes`);
    const session = (await (
      await fetch(`${pds}/xrpc/com.atproto.server.createSession`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ identifier: 'alice.test', password: t.password }),
      })
    ).json()) as { accessJwt: string };
    const put = await fetch(`${pds}/xrpc/com.atproto.repo.putRecord`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
      body: JSON.stringify({
        repo: did,
        collection: 'dev.knotless.ref',
        rkey,
        swapRecord: got.cid,
        record: { ...got.value, packs: packsInline },
      }),
    });
    assert.equal(put.status, 200, await put.text());

    const res = await alice.knotless('repo', 'compact', 'hoist');
    assert.equal(res.code, 0, res.stderr);
    const after = await refRecord<{ packs: Array<{ inline?: { $bytes: string } }> }>(
      'hoist',
      'refs/heads/main',
    );
    const inline = after.value.packs.reduce(
      (n, p) => n + Buffer.from(p.inline?.$bytes ?? '', 'base64').length,
      0,
    );
    assert.ok(inline <= 32 * 1024, `${inline} inline bytes left`);
    assert.equal(after.value.packs.length, 2);
    await cloneAndCheck('hoist', 2);
  });

  it('compacts in the background once big pushes pile up past twice a logarithmic list', async () => {
    autoCompact = true;
    try {
      assert.equal((await alice.knotless('repo', 'create', 'piled')).code, 0);
      const dir = await newRepo(alice, 'knotless://alice.test/piled');
      // 20 KB that does not compress: each push is a pack in a blob, which pushes never fold.
      for (let i = 0; i < 6; i++) {
        await commitFiles(alice, dir, { [`b${i}.bin`]: crypto.randomBytes(20_000) }, `b${i}`);
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
        assert.equal(await compactionsDone(alice), 0, `a compaction after push ${i + 1}`);
      }
      // Each push: a small structure pack, inline, and its 20 KB blob in a pack of its own.
      assert.deepEqual(kinds(await packList('piled', 'refs/heads/main')), { structure: 6, blobs: 6 });
      await commitFiles(alice, dir, { b6: crypto.randomBytes(20_000) }, 'b6');
      await alice.ok(dir, 'push', '-q', 'origin', 'main');
      // The seventh is past the threshold: the helper started a compaction, and it ends.
      assert.equal(await compactionsDone(alice), 1);
      const list = await packList('piled', 'refs/heads/main');
      assert.equal(planMerge(list), undefined, `not compacted: ${list.map((p) => p.size).join(', ')}`);
    } finally {
      autoCompact = false;
    }
    await cloneAndCheck('piled', 7);
  });

  it('compacts in the background after a `repo commit` that leaves the list far past logarithmic', async () => {
    autoCompact = true;
    try {
      assert.equal((await alice.knotless('repo', 'create', 'piled-commit')).code, 0);
      const dir = await newRepo(alice, 'knotless://alice.test/piled-commit');
      for (let i = 0; i < 6; i++) {
        await commitFiles(alice, dir, { [`b${i}.bin`]: crypto.randomBytes(20_000) }, `b${i}`);
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
      }
      assert.equal(await compactionsDone(alice), 0);
      assert.deepEqual(kinds(await packList('piled-commit', 'refs/heads/main')), { structure: 6, blobs: 6 });
      const file = `${alice.dir()}/b6.bin`;
      (await import('node:fs')).writeFileSync(file, crypto.randomBytes(20_000));
      const res = await alice.knotless(
        'repo',
        'commit',
        'piled-commit',
        '-m',
        'b6',
        '--add',
        `b6.bin=${file}`,
      );
      assert.equal(res.code, 0, res.stderr);
      assert.equal(await compactionsDone(alice), 1);
      const list = await packList('piled-commit', 'refs/heads/main');
      assert.equal(planMerge(list), undefined, `not compacted: ${list.map((p) => p.size).join(', ')}`);
      assert.equal(kinds(list)['mixed'], undefined);
    } finally {
      autoCompact = false;
    }
    await cloneAndCheck('piled-commit', 7);
  });

  it('refuses to compact another account’s repository', async () => {
    const res = await alice.knotless('repo', 'compact', 'bob.test/x');
    assert.notEqual(res.code, 0);
  });
});
