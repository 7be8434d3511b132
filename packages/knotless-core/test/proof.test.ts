// The checks of a getRecord proof (knotless-core records/proof.ts) against proofs that atproto's own
// libraries write: repositories of a secp256k1 and a P-256 key, whose trees are several levels deep,
// read for every key they hold and for keys they do not. Each check must be as strict as
// @atproto/repo's and @atproto/crypto's: a proof whose tree path leaves out the key never proves it
// absent, a high-S signature (valid for the curve, refused by atproto) is refused, and so are another
// key's signature, changed block bytes and a commit with a field it does not sign.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { P256Keypair, Secp256k1Keypair, parseDidKey, verifySignature, type Keypair } from '@atproto/crypto';
import { base58btc } from 'multiformats/bases/base58';
import { encode as cborEncode } from '@atproto/lex-cbor';
import {
  BlockMap,
  MemoryBlockstore,
  Repo,
  WriteOpAction,
  blocksToCarFile,
  cborToLex,
  concatBytesAsync,
  getRecords,
  readCarWithRoot,
  verifyCommitSig,
  type RecordCreateOp,
} from '@atproto/repo';
import {
  NodeMissing,
  atprotoSigningKey,
  commitSigned,
  leafMemo,
  listedAs,
  readCar,
  readCommit,
  treeGet,
  keyLayer,
  subtreeCid,
  treeFrontier,
  treeRange,
} from '../src/records/proof.ts';
import { CID } from '../src/records/proof-libs.ts';
import crypto from 'node:crypto';
import { create as digestOf } from 'multiformats/hashes/digest';

const KEYS = 300;
const rkey = (i: number) => `r${String(i).padStart(4, '0')}`;

async function repository(keypair: Keypair) {
  const storage = new MemoryBlockstore();
  const writes: RecordCreateOp[] = [];
  for (let i = 0; i < KEYS; i++)
    writes.push({
      action: WriteOpAction.Create,
      collection: 'dev.knotless.ref',
      rkey: rkey(i),
      record: { $type: 'dev.knotless.ref', ref: `refs/heads/b${i}`, target: 'a'.repeat(40) },
    });
  const repo = await Repo.create(storage, 'did:plc:proofproofproofproofproo', keypair, writes);
  const proof = async (key: string) =>
    concatBytesAsync(getRecords(storage, repo.cid, [{ collection: 'dev.knotless.ref', rkey: key }]));
  return { repo, proof };
}

const keypairs = async () => ({
  secp256k1: await Secp256k1Keypair.create(),
  p256: await P256Keypair.create(),
});

describe('the checks of a getRecord proof', () => {
  it('verify proofs of both key types and find every key the tree holds, and no other', async () => {
    const pairs = await keypairs();
    for (const [kind, keypair] of Object.entries(pairs)) {
      const other = kind === 'p256' ? pairs.secp256k1 : pairs.p256;
      const { repo, proof } = await repository(keypair);
      for (let i = 0; i < KEYS; i += 7) {
        const car = readCar(await proof(rkey(i)));
        assert.equal(car.root.toString(), repo.cid.toString());
        const commit = readCommit(car.blocks.get(car.root.toString()));
        assert.equal(commitSigned(commit, keypair.did()), true, kind);
        assert.equal(commitSigned(commit, other.did()), false, kind);
        const want = await repo.data.get(`dev.knotless.ref/${rkey(i)}`);
        assert.equal(
          treeGet(car.blocks, commit.data, `dev.knotless.ref/${rkey(i)}`)?.toString(),
          want?.toString(),
        );
      }
      for (const absent of ['r0000x', 'r0150a', 'r9999', 'a']) {
        const car = readCar(await proof(absent));
        const commit = readCommit(car.blocks.get(car.root.toString()));
        assert.equal(treeGet(car.blocks, commit.data, `dev.knotless.ref/${absent}`), null, absent);
      }
    }
  });

  it("never proves a key absent from a path that leaves it out: another key's proof, a node taken out", async () => {
    const { repo, proof } = await repository(await Secp256k1Keypair.create());
    const commitOf = (car: ReturnType<typeof readCar>) => readCommit(car.blocks.get(car.root.toString()));
    // Another key's proof: the key is found (its path is shared) or the walk stops at a node the
    // proof does not hold; never null. Some must stop, or the tree is too shallow to test anything.
    const car = readCar(await proof(rkey(0)));
    let stopped = 0;
    for (let i = 1; i < KEYS; i++) {
      const key = `dev.knotless.ref/${rkey(i)}`;
      try {
        const found = treeGet(car.blocks, commitOf(car).data, key);
        assert.equal(found?.toString(), (await repo.data.get(key))?.toString(), key);
      } catch (err) {
        assert.match(String(err), /a node of the tree's path is missing/);
        stopped++;
      }
    }
    assert.ok(stopped > 0);
    // Each node of a key's path taken out of its proof.
    for (const i of [5, 123, 250]) {
      const honest = readCar(await proof(rkey(i)));
      const commit = commitOf(honest);
      const nodes = [...honest.blocks.keys()].filter((cid) => cid !== honest.root.toString());
      const record = (await repo.data.get(`dev.knotless.ref/${rkey(i)}`))!.toString();
      const path = nodes.filter((cid) => cid !== record);
      assert.ok(path.length >= 2, 'a path of several levels');
      for (const cid of path) {
        const blocks = new Map(honest.blocks);
        blocks.delete(cid);
        assert.throws(() => treeGet(blocks, commit.data, `dev.knotless.ref/${rkey(i)}`), /missing/);
      }
    }
  });

  it('refuses a high-S signature, a signature in DER form, an unsigned field and changed bytes', async () => {
    const keypair = await Secp256k1Keypair.create();
    const { proof } = await repository(keypair);
    const bytes = await proof(rkey(1));
    const car = await readCarWithRoot(bytes);
    const commit = readCommit(readCar(bytes).blocks.get(car.root.toString()));
    const { sig, ...unsigned } = commit;

    // The same signature with s replaced by n - s: valid for the curve (@atproto/crypto accepts it
    // when told to allow malleable signatures), refused by atproto's rules and by these.
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = BigInt(`0x${Buffer.from(sig.subarray(32)).toString('hex')}`);
    const high = Buffer.concat([
      sig.subarray(0, 32),
      Buffer.from((n - s).toString(16).padStart(64, '0'), 'hex'),
    ]);
    const data = cborEncode(unsigned as never);
    assert.equal(await verifySignature(keypair.did(), data, high, { allowMalleableSig: true }), true);
    assert.equal(await verifySignature(keypair.did(), data, high), false);
    assert.equal(commitSigned({ ...commit, sig: high }, keypair.did()), false);
    assert.equal(commitSigned(commit, keypair.did()), true);

    // Through a whole CAR too: the commit re-encoded with the high-S signature is read, and refused.
    const blocks = new BlockMap();
    for (const [cid, block] of car.blocks) if (!cid.equals(car.root)) blocks.set(cid, block);
    const lexCommit = cborToLex(car.blocks.get(car.root)!) as Record<string, unknown>;
    const root = await blocks.add({ ...lexCommit, sig: high });
    const tampered = readCar(await blocksToCarFile(root, blocks));
    const read = readCommit(tampered.blocks.get(root.toString()));
    assert.equal(await verifyCommitSig({ ...lexCommit, sig: high } as never, keypair.did()), false);
    assert.equal(commitSigned(read, keypair.did()), false);

    // The signature in DER form, as a JavaScript library might hand it over: not the compact form.
    const r = sig.subarray(0, 32);
    const der = (x: Uint8Array) => {
      const v = Buffer.from(x);
      const t = v[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v;
      return Buffer.concat([Buffer.from([0x02, t.length]), t]);
    };
    const body = Buffer.concat([der(r), der(sig.subarray(32))]);
    assert.equal(
      commitSigned(
        { ...commit, sig: Buffer.concat([Buffer.from([0x30, body.length]), body]) },
        keypair.did(),
      ),
      false,
    );

    // A commit with one more field than the spec's: its signature would not cover it.
    const extra = new BlockMap();
    const extraRoot = await extra.add({ ...lexCommit, note: 'unsigned' });
    assert.throws(() => readCommit(extra.get(extraRoot)), /not a version 3 commit/);

    // One byte of a block changed: it no longer hashes to its CID.
    const changed = Buffer.from(bytes);
    changed[changed.length - 5] = changed[changed.length - 5]! ^ 1;
    assert.throws(() => readCar(changed), /does not hash to its CID/);
  });

  it("reads a DID document's #atproto key as @atproto/identity does: a Multikey, or an older type's point", async () => {
    const did = 'did:plc:proofproofproofproofproo';
    const doc = (id: string, type: string, publicKeyMultibase: string) => ({
      id: did,
      verificationMethod: [
        { id: `${did}#other`, type: 'Multikey', controller: did, publicKeyMultibase: 'z6Mk' },
        { id, type, controller: did, publicKeyMultibase },
      ],
    });
    for (const [legacy, keypair] of [
      ['EcdsaSecp256k1VerificationKey2019', await Secp256k1Keypair.create()],
      ['EcdsaSecp256r1VerificationKey2019', await P256Keypair.create()],
    ] as const) {
      const multikey = keypair.did().slice('did:key:'.length);
      assert.equal(atprotoSigningKey(did, doc('#atproto', 'Multikey', multikey)), keypair.did());
      assert.equal(atprotoSigningKey(did, doc(`${did}#atproto`, 'Multikey', multikey)), keypair.did());
      // The PLC directory's older form: the point uncompressed, its curve named by the type.
      const point = parseDidKey(keypair.did()).keyBytes;
      assert.equal(point.length, 65);
      assert.equal(atprotoSigningKey(did, doc('#atproto', legacy, base58btc.encode(point))), keypair.did());
      assert.equal(atprotoSigningKey(did, doc('#atproto_pds', 'Multikey', multikey)), undefined);
      assert.equal(atprotoSigningKey(did, doc('#atproto', 'JsonWebKey2020', multikey)), undefined);
      assert.throws(() =>
        atprotoSigningKey(did, doc('#atproto', legacy, base58btc.encode(point.subarray(1)))),
      );
    }
  });
});

describe('a range of keys walked over the proofs of its keys (a listing proved whole)', () => {
  // One repository's ref records (`proj~…`) between others' (`pro~…`, `proj2~…`), beside another
  // collection, as an account holds them: the range is every key starting with `proj~`.
  const inRange = Array.from({ length: 60 }, (_, i) => `proj~refs_heads_b${String(i).padStart(3, '0')}`);
  const around = [
    ...Array.from({ length: 40 }, (_, i) => `pro~refs_heads_x${i}`),
    ...Array.from({ length: 40 }, (_, i) => `proj2~refs_heads_y${i}`),
    'proj', // the prefix without its `~`: not in the range
  ];
  const lo = 'proj~';
  const hi = `proj~${'~'.repeat(512 - 'proj~'.length)}`;
  const full = (k: string) => `dev.knotless.ref/${k}`;

  async function account() {
    const storage = new MemoryBlockstore();
    const writes: RecordCreateOp[] = [...inRange, ...around].map((k, i) => ({
      action: WriteOpAction.Create,
      collection: 'dev.knotless.ref',
      rkey: k,
      record: { $type: 'dev.knotless.ref', ref: `refs/heads/b${i}`, target: 'a'.repeat(40) },
    }));
    for (let i = 0; i < 150; i++)
      writes.push({
        action: WriteOpAction.Create,
        collection: 'app.bsky.feed.like',
        rkey: `3l${String(i).padStart(11, '0')}`,
        record: { $type: 'app.bsky.feed.like', createdAt: new Date(0).toISOString() },
      });
    const repo = await Repo.create(
      storage,
      'did:plc:rangerangerangerangerang',
      await Secp256k1Keypair.create(),
      writes,
    );
    /** The nodes of the proofs of `keys` (and the bounds), as a reader gathers them. */
    // Each key's proof, read once: a listing's proofs are those of its keys.
    const proofs = new Map<string, ReturnType<typeof readCar>>();
    const proofOf = async (k: string) => {
      let car = proofs.get(k);
      if (car === undefined) {
        car = readCar(
          await concatBytesAsync(
            getRecords(storage, repo.cid, [{ collection: 'dev.knotless.ref', rkey: k }]),
          ),
        );
        proofs.set(k, car);
      }
      return car;
    };
    const blocksOf = async (keys: string[]) => {
      const blocks = new Map<string, Uint8Array>();
      let root: ReturnType<typeof readCommit>['data'] | undefined;
      for (const k of [lo, hi, ...keys]) {
        const car = await proofOf(k);
        root = readCommit(car.blocks.get(car.root.toString())).data;
        for (const [cid, bytes] of car.blocks) blocks.set(cid, bytes);
      }
      return { blocks, root: root! };
    };
    return { repo, blocksOf };
  }

  it('collects exactly the keys of the range, with their CIDs, from the proofs of a complete listing', async () => {
    const { repo, blocksOf } = await account();
    const { blocks, root } = await blocksOf(inRange);
    const found = treeRange(blocks, root, full(lo), `${full(lo)}\x7f`);
    assert.deepEqual(
      found.map((f) => f.key),
      inRange.map(full),
    );
    for (const f of found) assert.equal(f.cid.toString(), (await repo.data.get(f.key))?.toString());
  });

  it('never takes a listing that left a key out: the walk meets a node no proof holds, or finds the key', async () => {
    const { blocksOf } = await account();
    for (let i = 0; i < inRange.length; i++) {
      const listed = inRange.filter((_, j) => j !== i);
      const { blocks, root } = await blocksOf(listed);
      let keys: string[] | undefined;
      try {
        keys = treeRange(blocks, root, full(lo), `${full(lo)}\x7f`).map((f) => f.key);
      } catch (err) {
        assert.ok(err instanceof NodeMissing, String(err));
        continue;
      }
      assert.ok(keys.includes(full(inRange[i]!)), `the walk without ${inRange[i]} missed it`);
      assert.notDeepEqual(keys, listed.map(full));
    }
  });

  it('walks the range down from the root alone, level by level, reading only nodes whose span meets it (treeFrontier)', async () => {
    const { repo } = await account();
    const storage = repo.storage;
    const root = repo.data.pointer;
    const blocks = new Map<string, Uint8Array>([[root.toString(), (await storage.getBytes(root))!]]);
    const nodes = (await repo.data.allNodes()).filter((n) => n.isTree()).length;
    let rounds = 0;
    let read = 1;
    let step = treeFrontier(blocks, root as never, full(lo), `${full(lo)}\x7f`);
    while (step.missing.length > 0) {
      rounds++;
      for (const cid of step.missing) {
        // A node is asked for once: the next round only goes deeper.
        assert.equal(blocks.has(cid), false);
        const bytes = await storage.getBytes(CID.parse(cid));
        blocks.set(cid, bytes!);
        read++;
      }
      step = treeFrontier(blocks, root as never, full(lo), `${full(lo)}\x7f`);
    }
    // Complete by construction: exactly the range, each at the CID the tree holds.
    assert.deepEqual(
      step.found.map((f) => f.key),
      inRange.map(full),
    );
    for (const f of step.found) assert.equal(f.cid.toString(), (await repo.data.get(f.key))?.toString());
    // One round a level below the root, and only part of the tree: the others' keys and the likes
    // are not read.
    assert.ok(rounds < (await repo.data.getLayer()) + 1, `${rounds} rounds`);
    assert.ok(read < nodes, `${read} of ${nodes} nodes read`);
    // Any node of the range withheld: the walk never ends with missing empty.
    for (const cid of [...blocks.keys()].filter((c) => c !== root.toString())) {
      const less = new Map(blocks);
      less.delete(cid);
      const partial = treeFrontier(less, root as never, full(lo), `${full(lo)}\x7f`);
      assert.deepEqual(partial.missing, [cid]);
    }
  });

  it('refuses a walk that lacks a node of the range (the root node alone)', async () => {
    const { repo } = await account();
    // Nothing but the root node: every subtree meeting the range is missing.
    const blocks = new Map<string, Uint8Array>();
    const storage = repo.storage;
    const rootBytes = await storage.getBytes(repo.data.pointer);
    blocks.set(repo.data.pointer.toString(), rootBytes!);
    assert.throws(
      () => treeRange(blocks, repo.data.pointer as never, full(lo), `${full(lo)}\x7f`),
      (err: unknown) => err instanceof NodeMissing,
    );
  });

  it("builds every subtree of atproto's tree from its keys and their CIDs alone, at its layer (subtreeCid)", async () => {
    const { repo } = await account();
    let checked = 0;
    for (const node of await repo.data.allNodes()) {
      if (!node.isTree()) continue;
      const leaves = await node.list();
      const keys = leaves.map((l) => {
        const key = Buffer.from(l.key, 'utf8');
        return { key, cid: CID.parse(l.value.toString()), layer: keyLayer(key) };
      });
      const layer = await node.getLayer();
      assert.equal(subtreeCid(keys, layer)?.toString(), node.pointer.toString());
      // At another layer, or one key short, it is another subtree.
      assert.notEqual(subtreeCid(keys, layer + 1)?.toString(), node.pointer.toString());
      if (keys.length > 1)
        assert.notEqual(subtreeCid(keys.slice(1), layer)?.toString(), node.pointer.toString());
      checked++;
    }
    assert.ok(checked > 50, `${checked} nodes`);
  });

  it("proves a listing from the two ends' proofs alone, and never one that leaves out, adds or changes a key", async () => {
    const { repo, blocksOf } = await account();
    const { blocks, root } = await blocksOf([]);
    const listing = await Promise.all(
      inRange.map(async (k) => {
        const key = Buffer.from(full(k), 'utf8');
        const cid = CID.parse((await repo.data.get(full(k)))!.toString());
        return { key, cid, layer: keyLayer(key) };
      }),
    );
    /** The keys the tree holds in the range, taking a missing node's from `keys` when they build it. */
    const proved = (keys: typeof listing) => {
      const step = treeFrontier(blocks, root, full(lo), `${full(lo)}\x7f`);
      // The ends' paths hold every node across an end of the range: the missing are within it.
      assert.ok(step.holes.length > 0);
      const found = step.found.map((f) => `${f.key} ${f.cid.toString()}`);
      for (const hole of step.holes) {
        assert.ok(hole.from !== undefined && hole.to !== undefined && hole.layer !== undefined);
        assert.ok(hole.from.toString() >= full(lo) && hole.to.toString() <= `${full(lo)}\x7f`);
        const within = keys.filter(
          (k) => Buffer.compare(k.key, hole.from!) > 0 && Buffer.compare(k.key, hole.to!) < 0,
        );
        if (!subtreeCid(within, hole.layer)?.equals(hole.cid)) return undefined;
        found.push(...within.map((k) => `${k.key.toString()} ${k.cid.toString()}`));
      }
      return found.sort();
    };
    const said = (keys: typeof listing) => keys.map((k) => `${k.key.toString()} ${k.cid.toString()}`).sort();
    assert.deepEqual(proved(listing), said(listing));
    assert.equal(listing.length, inRange.length);
    for (let i = 0; i < listing.length; i += 7) {
      // Left out, changed, or one more key beside it: the subtree it is in is not built.
      const without = listing.filter((_, j) => j !== i);
      const changed = listing.map((k, j) =>
        j === i ? { ...k, cid: listing[(i + 1) % listing.length]!.cid } : k,
      );
      const extraKey = Buffer.from(`${listing[i]!.key.toString()}x`, 'utf8');
      const extra = [...listing, { key: extraKey, cid: listing[i]!.cid, layer: keyLayer(extraKey) }].sort(
        (a, b) => Buffer.compare(a.key, b.key),
      );
      // Either a node is not built (the walk then reads it), or what the tree holds is not what was listed.
      for (const keys of [without, changed, extra]) {
        const got = proved(keys);
        if (got !== undefined) assert.notDeepEqual(got, said(keys));
      }
    }
  });
});

describe("a listed record against the CID the account's tree holds it at (listedAs)", () => {
  /** The CID atproto gives `data` (DAG-CBOR, sha2-256), encoded by atproto's own library. */
  const cidOf = (data: unknown, codec = 0x71) =>
    CID.create(
      1,
      codec,
      digestOf(
        0x12,
        crypto
          .createHash('sha256')
          .update(cborEncode(data as never))
          .digest(),
      ),
    );
  const link = cidOf({ a: 1 });
  // A field named __proto__ is a field like any other (JSON.parse makes it one).
  const data: Record<string, unknown> = Object.fromEntries<unknown>([
    ['__proto__', 'x'],
    ['target', 'abc'],
    ['packs', [{ blob: link, inline: new Uint8Array([0, 1]) }]],
  ]);
  const listed = () =>
    JSON.parse(
      `{"__proto__":"x","target":"abc","packs":[{"blob":{"$link":"${link.toString()}"},"inline":{"$bytes":"AAE="}}]}`,
    ) as unknown;
  const own = JSON.parse(
    `{"__proto__":"x","target":"abc","packs":[{"blob":{"$link":"${link.toString()}"},"inline":{"$bytes":"AAE"}}]}`,
  ) as unknown;

  it("takes a value that encodes to the tree's CID, given as a string or as the CID, in the block's own spelling", () => {
    const cid = cidOf(data);
    assert.deepEqual(listedAs(listed(), cid.toString()), own);
    assert.deepEqual(listedAs(listed(), cid), own);
    assert.deepEqual(Object.keys(listedAs(listed(), cid) as object), ['__proto__', 'target', 'packs']);
  });

  it("refuses a value that is not the block: another target, a field more, another codec's CID of the same hash", () => {
    const cid = cidOf(data);
    const other = listed() as Record<string, unknown>;
    other['target'] = 'abd';
    assert.equal(listedAs(other, cid), undefined);
    assert.equal(listedAs(other, cid.toString()), undefined);
    const more = { ...(listed() as object), extra: 1 };
    assert.equal(listedAs(more, cid), undefined);
    const raw = CID.create(1, 0x55, cid.multihash);
    assert.equal(listedAs(listed(), raw), undefined);
    assert.equal(listedAs(listed(), raw.toString()), undefined);
    assert.equal(listedAs([listed()], cid), undefined);
  });

  it("reads a listing's shared links and bytes once (leafMemo) and still checks and spells each record on its own", () => {
    const cid = cidOf(data);
    const memo = leafMemo();
    // The same pack in several records, spelled with and without padding: each comes back in the
    // block's own spelling, whichever was read first.
    const unpadded = JSON.parse(JSON.stringify(listed()).replace('AAE=', 'AAE')) as unknown;
    assert.deepEqual(listedAs(listed(), cid, memo), own);
    assert.deepEqual(listedAs(unpadded, cid, memo), own);
    assert.deepEqual(listedAs(listed(), cid, memo), own);
    assert.equal(memo.links.size, 1);
    assert.equal(memo.bytes.size, 2);
    // A record whose bytes differ from those read before is refused, not taken for them.
    const changed = JSON.parse(JSON.stringify(listed()).replace('AAE=', 'AAI=')) as unknown;
    assert.equal(listedAs(changed, cid, memo), undefined);
    // A field that is no link or bytes but looks like one (another key beside it) is a map.
    const beside = JSON.parse(JSON.stringify(listed()).replace('"AAE="', '"AAE=","x":1')) as unknown;
    assert.equal(listedAs(beside, cid, memo), undefined);
    // What comes back is a form of its own: changing it changes no later record's reading.
    const first = listedAs(listed(), cid, memo) as { packs: Array<{ inline: { $bytes: string } }> };
    first.packs[0]!.inline.$bytes = 'AAI';
    assert.deepEqual(listedAs(listed(), cid, memo), own);
  });
});
