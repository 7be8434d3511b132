// The check of one event-stream commit before the agent's views take anything from it (format.md,
// "Verified"; security.md): its blocks hash to their CIDs and hold the commit the event names, of the
// event's account and revision, signed by the account's `#atproto` key; and its operations are the
// whole change (sync 1.1): every operation agrees with the new tree, and undoing them all on the tree
// the blocks hold gives back the tree the previous commit signed (`prevData`). A relay or proxy that
// drops, adds or alters an operation, a record or the signature therefore fails it.
//
// The tree is @atproto/repo's MST, loaded from the event's blocks; the commit's signature is checked
// by records/proof.ts with Node's own crypto (the library's secp256k1 in JavaScript costs the agent
// more CPU per commit than everything else it does with one).
import type { MemoryBlockstore, MST, readCarWithRoot } from '@atproto/repo';
import { commitSigned, readCommit } from 'knotless-core/records/proof';

/** An operation as the event carries it. */
interface Op {
  action?: unknown;
  path?: unknown;
  cid?: unknown;
  prev?: unknown;
}

/** A CID as the stream's decoder gives it (@atproto/lex-data's). */
interface CidLike {
  toString(): string;
  bytes: Uint8Array;
}

/** The libraries the check needs, from the agent's stream bundle (stream-libs.ts). */
export interface CheckLibs {
  readCarWithRoot: typeof readCarWithRoot;
  MemoryBlockstore: typeof MemoryBlockstore;
  MST: typeof MST;
}

/** A checked commit: each operation's path with its record block (null: deleted), in order. */
export type CheckedOps = Array<{ path: string; cid: string | null; block: Uint8Array | null }>;

const isCid = (x: unknown): x is CidLike =>
  typeof x === 'object' && x !== null && (x as CidLike).bytes instanceof Uint8Array;

/**
 * Checks a `#commit` event of `did` as the file's header says, `keyOf` giving the account's key
 * (`refresh`: read afresh, asked once when the cached one does not match); throws with what failed.
 */
export async function checkCommitEvent(
  msg: Record<string, unknown>,
  did: string,
  keyOf: (refresh: boolean) => Promise<string>,
  libs: CheckLibs,
): Promise<CheckedOps> {
  const blocks = msg['blocks'];
  if (!(blocks instanceof Uint8Array)) throw new Error('the commit carries no blocks');
  // readCarWithRoot checks every block against its CID.
  const car = await libs.readCarWithRoot(blocks);
  if (!isCid(msg['commit']) || car.root.toString() !== msg['commit'].toString())
    throw new Error('its blocks hold another commit than the one it names');
  const commit = readCommit(car.blocks.get(car.root));
  if (commit.did !== did) throw new Error("its commit is another account's");
  if (commit.rev !== msg['rev']) throw new Error('its commit is of another revision');
  let signed = commitSigned(commit, await keyOf(false));
  if (!signed) signed = commitSigned(commit, await keyOf(true));
  if (!signed) throw new Error("its signature does not match the account's key");

  const prevData = msg['prevData'];
  if (!isCid(prevData)) throw new Error('it does not name the tree it was made on (prevData)');
  const ops = Array.isArray(msg['ops']) ? (msg['ops'] as Op[]) : [];
  const storage = new libs.MemoryBlockstore(car.blocks);
  let tree = libs.MST.load(storage, commit.data);
  const out: CheckedOps = [];
  for (const op of ops) {
    const path = op.path;
    if (typeof path !== 'string') throw new Error('an operation without a path');
    const now = await tree.get(path);
    if (op.action === 'delete') {
      if (now !== null) throw new Error(`an operation deletes ${path}, which its tree still holds`);
      out.push({ path, cid: null, block: null });
    } else if (op.action === 'create' || op.action === 'update') {
      if (!isCid(op.cid) || now === null || now.toString() !== op.cid.toString())
        throw new Error(`an operation on ${path} does not match its tree`);
      const block = car.blocks.get(now);
      if (block === undefined) throw new Error(`the record of ${path} is missing from its blocks`);
      out.push({ path, cid: now.toString(), block });
    } else throw new Error('an operation of an unknown kind');
  }
  // Undone in reverse, the operations must lead back to the tree the previous commit signed: an
  // operation left out or made up would lead elsewhere.
  for (const op of [...ops].reverse()) {
    const path = op.path as string;
    if (op.action === 'create') tree = await tree.delete(path);
    else {
      if (!isCid(op.prev)) throw new Error(`an operation on ${path} does not say what it replaced`);
      tree =
        op.action === 'update'
          ? await tree.update(path, op.prev as never)
          : await tree.add(path, op.prev as never);
    }
  }
  if ((await tree.getPointer()).toString() !== prevData.toString())
    throw new Error('its operations do not lead back to the tree it was made on');
  return out;
}
