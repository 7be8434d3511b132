// A listing of a repository's `dev.knotless.ref` records, proved (format.md, "Verified"): each record
// at the CID the listing gave, by the account's signed commit, and no other key under the
// repository's prefix. Each listed key's proof (com.atproto.sync.getRecord, a few at once) and the
// proofs of two keys bounding the range are read; together their tree paths hold every node of the
// Merkle search tree whose span meets the range, when the listing left nothing out, because no
// subtree of an atproto tree is empty (the argument is written out in format.md). The range is then
// walked from one signed commit's root over those nodes (records/proof.ts `treeRange`), and must be
// exactly the listing. The one rule of every reader of such a repository and of `knotless verify`.
import { REF_COLLECTION, refKeyPrefix } from './collections.ts';
import { rkeyOf, type ListedRecord } from './list-records.ts';
import type { RemoteRepo } from './remote-repo.ts';
import { unverified, type ProofTree, type VerifiedRecord } from './verified-read.ts';

/** Verified reads of the owner's records (read-refs.ts `openVerifiedReads`), as far as they are used here. */
export interface ProofReads {
  read: (collection: string, rkey: string, keep?: (tree: ProofTree) => void) => Promise<VerifiedRecord>;
}

/** Record proofs read at once: bounded, so a PDS is not flooded. */
export const PROOF_READS = 8;
/** Listings proved before a mismatch is taken as the PDS's and not a push landing in between. */
const ATTEMPTS = 3;
/** Rounds of proofs read again when those read span commits whose trees differ in the range. */
const ROUNDS = 3;
/** The longest record key (atproto's limit): the highest key under a prefix is this long, all `~`. */
const MAX_KEY = 512;
/** Above every record key that starts with a prefix: keys use `A-Za-z0-9._:~-`, all below DEL. */
const TOP = '\x7f';

/** A listing proved complete, its records as the proofs hold them, at the newest commit proved. */
export interface ProvedListing {
  records: ListedRecord[];
  rev: string;
  commit: string;
}

/** One key's proof: its record (or absence), and the tree it was read from. */
interface Proof {
  got: VerifiedRecord;
  tree: ProofTree;
}

/** What did not hold of a listing, to say in the refusal; undefined when it is proved. */
type Mismatch = 'changed' | 'left-out' | 'unprovable';

const SAID: Record<Mismatch, string> = {
  changed: "a ref record listed is not the one the account's signed commit holds",
  'left-out': "the listing leaves out a ref record the account's signed commit holds",
  unprovable: 'the proofs of its ref records do not show the listing complete',
};

/**
 * Proves `listed` (the repository's records as the PDS listed them, {@link RemoteRepo.listRefRecords})
 * with `reads`, listing again when it does not hold (a push may land between a listing and its
 * proofs), up to {@link ATTEMPTS} listings; then refuses it with one sentence (unverified-remote,
 * exit 21). A proof that does not hold itself is refused at once, as every verified read is.
 */
export async function proveListing(
  remote: RemoteRepo,
  reads: ProofReads,
  listed: ListedRecord[],
): Promise<ProvedListing> {
  let why: Mismatch = 'unprovable';
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    if (attempt > 0) listed = await remote.listRefRecords();
    const out = await proveOnce(remote, reads, listed);
    if (typeof out !== 'string') return out;
    why = out;
  }
  throw unverified(nameOf(remote), SAID[why]);
}

/** One listing against the proofs of its keys; a {@link Mismatch} when it does not hold. */
async function proveOnce(
  remote: RemoteRepo,
  reads: ProofReads,
  listed: ListedRecord[],
): Promise<ProvedListing | Mismatch> {
  const prefix = refKeyPrefix(remote.name);
  const bounds = [prefix, prefix + '~'.repeat(Math.max(1, MAX_KEY - prefix.length))];
  const keys = [...new Set([...bounds, ...listed.map((r) => rkeyOf(r.uri))])];
  const proofs = new Map<string, Proof>();
  let want = keys;
  for (let round = 0; ; round++) {
    await readProofs(reads, want, proofs);
    const newest = [...proofs.values()].reduce((a, b) => (b.tree.rev > a.tree.rev ? b : a)).tree;
    const inRange = await walk(remote, newest, proofs, prefix);
    if (inRange !== undefined) return compare(remote, listed, inRange, proofs, newest, await cidOf());
    // The proofs came from commits whose trees differ in the range: those not at the newest are
    // read again (the PDS answers with its newest), and the range walked again.
    want = keys.filter((k) => proofs.get(k)!.tree.commit !== newest.commit);
    if (want.length === 0 || round + 1 >= ROUNDS) return 'unprovable';
  }
}

/** Reads the proofs of `keys`, {@link PROOF_READS} at once, into `proofs`. */
async function readProofs(reads: ProofReads, keys: string[], proofs: Map<string, Proof>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(PROOF_READS, keys.length) }, async () => {
      for (let i = next++; i < keys.length; i = next++) {
        const key = keys[i]!;
        let tree: ProofTree | undefined;
        const got = await reads.read(REF_COLLECTION, key, (t) => (tree = t));
        if (tree === undefined) throw new Error(`the proof of ${key} came without its tree`);
        proofs.set(key, { got, tree });
      }
    }),
  );
}

/**
 * The keys and CIDs under `prefix` in the tree of `at`, walked over the nodes of every proof read
 * (each checked against its CID, so nodes of other commits stand for themselves); undefined when
 * a node the walk needs is in none of them.
 */
async function walk(
  remote: RemoteRepo,
  at: ProofTree,
  proofs: Map<string, Proof>,
  prefix: string,
): Promise<Map<string, string> | undefined> {
  const { NodeMissing, treeRange } = await import('./proof.ts');
  const blocks = new Map<string, Uint8Array>();
  for (const p of proofs.values()) for (const [cid, bytes] of p.tree.blocks) blocks.set(cid, bytes);
  const lo = `${REF_COLLECTION}/${prefix}`;
  try {
    const found = treeRange(blocks, at.data, lo, lo + TOP);
    return new Map(found.map((f) => [f.key.slice(REF_COLLECTION.length + 1), f.cid.toString()]));
  } catch (err) {
    if (err instanceof NodeMissing) return undefined;
    throw unverified(nameOf(remote), "the proofs' tree is malformed", err);
  }
}

/**
 * The listing against the keys the tree holds: exactly the same keys, each at the same CID. The
 * records are taken from the proofs (a listing's value is not checked against its CID, a proof's
 * block is), so nothing of the listing but its keys and CIDs is used.
 */
function compare(
  remote: RemoteRepo,
  listed: ListedRecord[],
  inTree: Map<string, string>,
  proofs: Map<string, Proof>,
  at: ProofTree,
  recordCid: (value: Record<string, unknown>) => string,
): ProvedListing | Mismatch {
  const byKey = new Map(listed.map((r) => [rkeyOf(r.uri), r.cid]));
  if (byKey.size !== listed.length) return 'changed';
  for (const [key, cid] of byKey) if (inTree.get(key) !== cid) return 'changed';
  // A value the listing changed under the record's own CID: not used (the proofs' are), but a PDS
  // that says one thing in its listing and signs another is not believed in anything.
  for (const r of listed) if (!hashesTo(r, recordCid)) return 'changed';
  if (inTree.size !== byKey.size) return 'left-out';
  const records: ListedRecord[] = [];
  for (const [key, cid] of [...inTree].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const got = proofs.get(key)!.got;
    // The key's own proof, at whichever commit, holds the record with this CID: its bytes.
    if (!got.found || got.cid !== cid) return 'changed';
    records.push({ uri: `at://${remote.owner.did}/${REF_COLLECTION}/${key}`, cid, value: got.value });
  }
  return { records, rev: at.rev, commit: at.commit };
}

/** The CID of a record's JSON form, loaded with the proofs' libraries. */
async function cidOf(): Promise<(value: Record<string, unknown>) => string> {
  return (await import('./proof.ts')).recordCid;
}

/** Whether a listed record's value is the one its CID names. */
function hashesTo(r: ListedRecord, recordCid: (value: Record<string, unknown>) => string): boolean {
  if (typeof r.value !== 'object' || r.value === null || Array.isArray(r.value)) return false;
  try {
    return recordCid(r.value as Record<string, unknown>) === r.cid;
  } catch (err) {
    // A value no record could be (a link or bytes that do not parse): not the record its CID names.
    if (err instanceof Error) return false;
    throw err;
  }
}

/** How refusals name the repository, as the table's reader names it. */
function nameOf(remote: RemoteRepo): string {
  return `${remote.owner.handle ?? remote.owner.did}/${remote.name}`;
}
