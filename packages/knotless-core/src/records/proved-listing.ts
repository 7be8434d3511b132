// A listing of a repository's `dev.knotless.ref` records, proved (format.md, "Verified"): each record
// at the CID the listing gave, by the account's signed commit, and no other key under the
// repository's prefix. From one signed commit (a verified read's proof, the one that showed the
// repository has no ref table when there is one), the commit's Merkle search tree is walked down
// over the repository's key range, level by level: each round reads, with
// com.atproto.sync.getBlocks, every node of the level whose span can hold a key of the range (no
// other), in a few batched requests. Every block is checked against its CID, so the walk from the
// signed root is complete by construction: the keys it finds are all the range holds. The listing
// must be exactly those keys at exactly those CIDs, and each listed value must be the block its
// CID names. What it costs grows with the tree's depth and the nodes of the range, not with a
// request per record. The one rule of every reader of such a repository and of `knotless verify`.
import { REF_COLLECTION, refKeyPrefix } from './collections.ts';
import { rkeyOf, type ListedRecord } from './list-records.ts';
import type { RemoteRepo } from './remote-repo.ts';
import {
  WHOLE_REPOSITORY_BYTES,
  answeredNoProof,
  unverified,
  type ProofTree,
  type VerifiedRecord,
} from './verified-read.ts';
import type { BodyTooLarge } from '../xrpc/http-pool.ts';
import type { CID } from './proof-libs.ts';
import type { Hole } from './proof.ts';

/** Verified reads of the owner's records (read-refs.ts `openVerifiedReads`), as far as a proof of a listing uses them. */
export interface ProofReads {
  /**
   * One record with its proof, checked, and its commit no older than the newest verified;
   * `optional`: an HTTP 400 is refused at once (records/verified-read.ts, `optional`).
   */
  read: (
    collection: string,
    rkey: string,
    keep?: (tree: ProofTree) => void,
    optional?: boolean,
  ) => Promise<VerifiedRecord>;
  /**
   * Blocks of the account's repository by CID, in one request of at most `maxBytes` (records/
   * verified-read.ts `readBlocks`): each checked against its CID, so they stand for themselves.
   */
  blocks: (
    cids: readonly string[],
    maxBytes: number,
    tooLarge: (err: BodyTooLarge) => Error,
  ) => Promise<Map<string, Uint8Array> | undefined>;
}

/** Record proofs read at once (`knotless verify`'s verdict per ref): bounded, so a PDS is not flooded. */
export const PROOF_READS = 8;
/** Requests for blocks in flight at once within a round of the walk. */
const BLOCK_READS = 4;
/** Listings proved before a mismatch is taken as the PDS's and not a push landing in between. */
const ATTEMPTS = 3;
/**
 * The longest getBlocks URL sent: a CID is 59 characters, so about 120 a request; servers and
 * proxies commonly refuse request lines past 8 KiB.
 */
export const MAX_BLOCKS_URL = 8000;
/** The most nodes of the range one proof reads: a listing of 500,000 records has about a third as many. */
export const MAX_NODES = 200_000;
/** The most bytes of nodes one proof reads, all requests together (as much as a whole repository). */
const MAX_BYTES = WHOLE_REPOSITORY_BYTES;
/** The most bytes one getBlocks answer may have. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** Above every record key that starts with a prefix: keys use `A-Za-z0-9._:~-`, all below DEL. */
const TOP = '\x7f';
/** The longest record key atproto allows. */
const MAX_RKEY = 512;

/** A listing proved complete, its records as the signed blocks hold them, at the commit proved. */
export interface ProvedListing {
  records: ListedRecord[];
  rev: string;
  commit: string;
}

/** What did not hold of a listing, to say in the refusal. */
type Mismatch = 'changed' | 'left-out' | 'no-blocks';

const SAID: Record<Mismatch, string> = {
  changed: "a ref record listed is not the one the account's signed commit holds",
  'left-out': "the listing leaves out a ref record the account's signed commit holds",
  'no-blocks': "the PDS did not give the nodes of the account's signed tree that show the listing complete",
};

/** What one proof has read of a PDS's blocks so far: bounded against a PDS that makes its tree huge. */
interface Spent {
  nodes: number;
  bytes: number;
}

/**
 * Proves `listed` (the repository's records as the PDS listed them, {@link RemoteRepo.listRefRecords})
 * against the tree of the signed commit `tree` (a verified read's proof; read here when not given),
 * listing again and reading a newer commit when it does not hold (a push may land between a
 * listing and the commit), up to {@link ATTEMPTS} times; then refuses it with one sentence
 * (unverified-remote, exit 21). A proof or a tree that does not hold itself is refused at once, as
 * every verified read is.
 */
export async function proveListing(
  remote: RemoteRepo,
  reads: ProofReads,
  listed: ListedRecord[],
  tree?: ProofTree,
): Promise<ProvedListing> {
  const prefix = refKeyPrefix(remote.name);
  // Nodes read, by CID: each checked against it, so a node read at one commit stands for itself at
  // the next (an attempt after a push reads only the nodes the push changed).
  const known = new Map<string, Uint8Array>();
  const decoded = new Map<string, unknown>();
  const spent: Spent = { nodes: 0, bytes: 0 };
  let why: Mismatch = 'no-blocks';
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (attempt > 0 || tree === undefined) {
      const [again, at] = await Promise.all([
        attempt > 0 ? remote.listRefRecords() : Promise.resolve(listed),
        commitTree(reads, prefix),
      ]);
      listed = again;
      tree = at;
    }
    for (const [cid, bytes] of tree.blocks) known.set(cid, bytes);
    const inRange = await walk(remote, reads, tree, { known, decoded }, prefix, spent, listed);
    const out = typeof inRange === 'string' ? inRange : await compare(remote, listed, inRange, tree);
    if (typeof out !== 'string') return out;
    why = out;
  }
  throw unverified(nameOf(remote), SAID[why]);
}

/** The account's newest signed commit, with its tree's path to the start of the range. */
async function commitTree(reads: ProofReads, prefix: string): Promise<ProofTree> {
  let tree: ProofTree | undefined;
  await reads.read(REF_COLLECTION, prefix, (t) => (tree = t));
  if (tree === undefined) throw new Error(`the proof of ${prefix} came without its tree`);
  return tree;
}

/**
 * The keys and CIDs under `prefix` in the tree of `at`: walked from its root, each round reading
 * the nodes the range goes on into and `nodes.known` lacks (`nodes.decoded`: those decoded so far). {@link Mismatch} `no-blocks` when the PDS does
 * not give one (it may have dropped them for a newer commit: the caller tries again).
 */
async function walk(
  remote: RemoteRepo,
  reads: ProofReads,
  at: ProofTree,
  nodes: { known: Map<string, Uint8Array>; decoded: Map<string, unknown> },
  prefix: string,
  spent: Spent,
  listed: ListedRecord[],
): Promise<Map<string, CID> | Mismatch> {
  const { treeFrontier } = await import('./proof.ts');
  const lo = `${REF_COLLECTION}/${prefix}`;
  const range = { low: Buffer.from(lo, 'utf8'), high: Buffer.from(lo + TOP, 'utf8') };
  // Made at the first node the walk lacks: a small repository's keys may all be on the first
  // proof's path, and the listed keys' layers and CIDs (a sha-256 each) are then not needed.
  let built: Awaited<ReturnType<typeof builder>> | null = null;
  let bounded = false;
  // A walk ends: each round goes one level down a tree whose depth treeFrontier bounds.
  for (;;) {
    let step: ReturnType<typeof treeFrontier>;
    try {
      step = treeFrontier(nodes.known, at.data, lo, lo + TOP, nodes.decoded);
    } catch (err) {
      throw unverified(nameOf(remote), "the account's signed tree is malformed", err);
    }
    const found = new Map(step.found.map((f) => [f.key.slice(REF_COLLECTION.length + 1), f.cid]));
    // A node wholly within the range whose CID the listing's keys build is proved by it, unread; a
    // node across an end of the range needs the path of that end's proof first, read once.
    const missing: string[] = [];
    const ends = { low: false, high: false };
    if (step.holes.length > 0 && built === null) built = await builder(listed);
    for (const hole of step.holes) {
      const inside =
        hole.from !== undefined &&
        hole.to !== undefined &&
        Buffer.compare(hole.from, range.low) >= 0 &&
        Buffer.compare(hole.to, range.high) <= 0;
      const keys = inside ? built?.(hole) : undefined;
      if (keys !== undefined) {
        for (const k of keys) found.set(k.key.toString('utf8').slice(REF_COLLECTION.length + 1), k.cid);
        continue;
      }
      missing.push(hole.cid.toString());
      if (hole.from === undefined || Buffer.compare(hole.from, range.low) < 0) ends.low = true;
      if (hole.to === undefined || Buffer.compare(hole.to, range.high) > 0) ends.high = true;
    }
    if (missing.length === 0) return found;
    if (!bounded && typeof built === 'function' && (ends.low || ends.high)) {
      bounded = true;
      await readEnds(reads, at, nodes.known, prefix, ends);
      continue;
    }
    spent.nodes += missing.length;
    if (spent.nodes > MAX_NODES)
      throw unverified(
        nameOf(remote),
        `the account's signed tree has more than ${MAX_NODES} nodes in the repository's range`,
      );
    const got = await readNodes(remote, reads, missing, spent);
    if (got === undefined) return 'no-blocks';
    for (const [cid, bytes] of got) nodes.known.set(cid, bytes);
  }
}

/** The keys of a record key range, each with its record's CID and its layer in the tree, in key order. */
type Keyed = Array<{ key: Buffer; cid: CID; layer: number }>;

/**
 * What the listing proves of a node the walk lacks (see {@link walk}): the listed keys within its
 * span when the subtree they build at its layer has its CID, else undefined. Undefined when the
 * listing holds a CID that does not parse (it is then refused by the comparison).
 */
async function builder(listed: ListedRecord[]): Promise<((hole: Hole) => Keyed | undefined) | undefined> {
  const { keyLayer, parseCid, subtreeCid } = await import('./proof.ts');
  const keys: Keyed = [];
  for (const r of listed) {
    const cid = parseCid(r.cid);
    if (cid === undefined) return undefined;
    const key = Buffer.from(`${REF_COLLECTION}/${rkeyOf(r.uri)}`, 'utf8');
    keys.push({ key, cid, layer: keyLayer(key) });
  }
  keys.sort((a, b) => Buffer.compare(a.key, b.key));
  // The first key at or past `bound` (keys.length when none is).
  const from = (bound: Buffer, past: boolean) => {
    let a = 0;
    let b = keys.length;
    while (a < b) {
      const m = (a + b) >> 1;
      const order = Buffer.compare(keys[m]!.key, bound);
      if (order < 0 || (past && order === 0)) a = m + 1;
      else b = m;
    }
    return a;
  };
  return (hole) => {
    if (hole.layer === undefined || hole.from === undefined || hole.to === undefined) return undefined;
    const within = keys.slice(from(hole.from, true), from(hole.to, false));
    const cid = subtreeCid(within, hole.layer);
    return cid != null && cid.equals(hole.cid) ? within : undefined;
  };
}

/**
 * The tree's paths to the ends of the range `ends` names, read from the proofs of the keys just
 * below and just above every key of the repository (absent, both): added to `known` when they are of
 * the commit `at` (a push landing between the two reads leaves the walk to read the nodes instead).
 * A PDS that will not give such a proof (it refuses a key that long, or answers an absence with an
 * error) leaves the walk to read those nodes by CID, each checked as every node is: only a proof
 * that does not hold is refused.
 */
async function readEnds(
  reads: ProofReads,
  at: ProofTree,
  known: Map<string, Uint8Array>,
  prefix: string,
  ends: { low: boolean; high: boolean },
): Promise<void> {
  const keys = [
    ...(ends.low ? [prefix] : []),
    // Above every key of the prefix: a record key is at most 512 characters, none above '~'.
    ...(ends.high ? [prefix + '~'.repeat(Math.max(1, MAX_RKEY - prefix.length))] : []),
  ];
  await Promise.all(
    keys.map((rkey) =>
      reads
        .read(
          REF_COLLECTION,
          rkey,
          (tree) => {
            if (!tree.data.equals(at.data)) return;
            for (const [cid, bytes] of tree.blocks) known.set(cid, bytes);
          },
          true,
        )
        .catch((err: unknown) => {
          // The nodes this proof would have given are read by CID instead (see above).
          if (!answeredNoProof(err, 400)) throw err;
        }),
    ),
  );
}

/**
 * The blocks `cids` name, in requests of URLs no longer than {@link MAX_BLOCKS_URL},
 * {@link BLOCK_READS} at once; undefined when the PDS does not give every one.
 */
async function readNodes(
  remote: RemoteRepo,
  reads: ProofReads,
  cids: string[],
  spent: Spent,
): Promise<Map<string, Uint8Array> | undefined> {
  const batches: string[][] = [];
  // The URL's fixed part (`/xrpc/com.atproto.sync.getBlocks?did=…`) is well under 200 characters.
  let batch: string[] = [];
  let length = 200;
  for (const cid of cids) {
    const more = '&cids='.length + cid.length;
    if (batch.length > 0 && length + more > MAX_BLOCKS_URL) {
      batches.push(batch);
      batch = [];
      length = 200;
    }
    batch.push(cid);
    length += more;
  }
  if (batch.length > 0) batches.push(batch);
  const out = new Map<string, Uint8Array>();
  const tooLarge = (err: unknown) =>
    unverified(
      nameOf(remote),
      `the nodes of the account's signed tree in the repository's range are larger than the ${MAX_BYTES / 1024 / 1024} MiB knotless reads to check a listing`,
      err,
    );
  let complete = true;
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(BLOCK_READS, batches.length) }, async () => {
      for (let i = next++; i < batches.length && complete; i = next++) {
        const asked = batches[i]!;
        const left = MAX_BYTES - spent.bytes;
        if (left <= 0) throw tooLarge(new Error('past the bound'));
        const got = await reads.blocks(asked, Math.min(MAX_ANSWER_BYTES, left), tooLarge);
        if (got === undefined || asked.some((cid) => !got.has(cid))) {
          complete = false;
          return;
        }
        for (const [cid, bytes] of got) {
          spent.bytes += bytes.length;
          out.set(cid, bytes);
        }
      }
    }),
  );
  if (spent.bytes > MAX_BYTES) throw tooLarge(new Error('past the bound'));
  return complete ? out : undefined;
}

/**
 * The listing against the keys the tree holds: exactly the same keys, each at the same CID, and
 * each listed value the block its CID names (taken in the block's own form).
 */
async function compare(
  remote: RemoteRepo,
  listed: ListedRecord[],
  inTree: Map<string, CID>,
  at: ProofTree,
): Promise<ProvedListing | Mismatch> {
  const { leafMemo, listedAs } = await import('./proof.ts');
  const memo = leafMemo();
  const byKey = new Map(listed.map((r) => [rkeyOf(r.uri), r]));
  if (byKey.size !== listed.length) return 'changed';
  // A CID keeps the string it was last turned into: each is made once.
  for (const [key, r] of byKey) if (inTree.get(key)?.toString() !== r.cid) return 'changed';
  if (inTree.size !== byKey.size) return 'left-out';
  const records: ListedRecord[] = [];
  for (const [key, cid] of [...inTree].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const value = listedAs(byKey.get(key)!.value, cid, memo);
    // A value the listing changed under the record's own CID: the PDS says one thing in its
    // listing and signs another.
    if (value === undefined) return 'changed';
    records.push({ uri: `at://${remote.owner.did}/${REF_COLLECTION}/${key}`, cid: cid.toString(), value });
  }
  return { records, rev: at.rev, commit: at.commit };
}

/** How refusals name the repository, as the table's reader names it. */
function nameOf(remote: RemoteRepo): string {
  return `${remote.owner.handle ?? remote.owner.did}/${remote.name}`;
}
