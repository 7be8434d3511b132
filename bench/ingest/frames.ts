// Synthetic relay frames for the ingest bench: the network's traffic as a relay sends it. Each
// account has its own secp256k1 key (@atproto/crypto, as a PDS's); each commit is a real one (a
// record block, an MST node over it, a commit block signed by the account's key, all in a CAR) in a
// #commit frame whose header and body are CBOR, made by @atproto/repo and @atproto/xrpc-server as a
// relay's would be (ingest-bench.test.ts has @atproto/sync's own firehose client validate and verify
// them). Made before the clock starts; only the sequence number changes as the frames are sent
// (patched in place).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { TID } from '@atproto/common-web';
import { Secp256k1Keypair } from '@atproto/crypto';
import { cidForLex, encode } from '@atproto/lex-cbor';
import { BlockMap, blocksToCarFile, signCommit } from '@atproto/repo';
import { MessageFrame } from '@atproto/xrpc-server';

/** A frame ready to send: its bytes, and where its 4-byte sequence number sits in them. */
export interface ReadyFrame {
  bytes: Buffer;
  seqAt: number;
}

/** The marker sequence number frames are made with; found again in the bytes, then overwritten. */
const MARK = 0x7f6e5d4c;

/** Encodes a frame with the marker sequence and finds where the number sits. */
export function ready(type: string, body: Record<string, unknown>): ReadyFrame {
  const bytes = Buffer.from(new MessageFrame({ ...body, seq: MARK } as never, { type }).toBytes());
  // "seq" as a CBOR text key, then a uint32 (0x1a) holding the marker.
  const needle = Buffer.from([0x63, 0x73, 0x65, 0x71, 0x1a, 0x7f, 0x6e, 0x5d, 0x4c]);
  const at = bytes.indexOf(needle);
  if (at < 0) throw new Error('the sequence number was not found in the frame');
  return { bytes, seqAt: at + 5 };
}

/**
 * Writes `seq` into a frame, in place. The number's four bytes are its canonical DAG-CBOR form only
 * from 65,536 to 2^32 - 1 (a strict decoder, @atproto/sync's, refuses a smaller number so written).
 */
export function setSeq(f: ReadyFrame, seq: number): Buffer {
  if (!Number.isInteger(seq) || seq < 0x10000 || seq > 0xffffffff)
    throw new RangeError(`sequence number ${seq} has no four-byte canonical form`);
  f.bytes.writeUInt32BE(seq, f.seqAt);
  return f.bytes;
}

function fakeDid(i: number): string {
  return `did:plc:${crypto
    .createHash('sha256')
    .update(`bench-${i}`)
    .digest('hex')
    .slice(0, 24)
    .replace(/[0189]/g, 'a')}`;
}

const KINDS = [
  { weight: 50, collection: 'app.bsky.feed.like' },
  { weight: 15, collection: 'app.bsky.feed.post' },
  { weight: 15, collection: 'app.bsky.graph.follow' },
  { weight: 12, collection: 'app.bsky.feed.repost' },
  { weight: 5, collection: 'app.bsky.actor.profile' },
] as const;

function recordFor(collection: string, i: number, now: string): Record<string, unknown> {
  const subject = { uri: `at://${fakeDid(i + 1)}/app.bsky.feed.post/3k${i}`, cid: '' };
  switch (collection) {
    case 'app.bsky.feed.post':
      return { $type: collection, text: `post number ${i} about nothing much`, createdAt: now };
    case 'app.bsky.graph.follow':
      return { $type: collection, subject: fakeDid(i + 7), createdAt: now };
    case 'app.bsky.actor.profile':
      return { $type: collection, displayName: `Account ${i}`, description: 'hello' };
    default:
      return {
        $type: collection,
        subject: { uri: subject.uri, cid: 'bafyreib2rxk3rh6kzwq' },
        createdAt: now,
      };
  }
}

/** One account's commit of one record, as a relay's #commit frame, signed with its key. */
async function commitFrame(i: number, collection: string, key: Secp256k1Keypair): Promise<ReadyFrame> {
  const did = fakeDid(i);
  const now = new Date().toISOString();
  const rev = TID.nextStr();
  const path = `${collection}/${TID.nextStr()}`;
  const blocks = new BlockMap();
  const recordCid = await blocks.add(recordFor(collection, i, now) as never);
  const node = { l: null, e: [{ p: 0, k: new TextEncoder().encode(path), v: recordCid, t: null }] };
  const dataCid = await blocks.add(node);
  const commit = await signCommit({ did, version: 3, data: dataCid, rev, prev: null }, key);
  const commitBytes = encode(commit as never);
  const commitCid = await cidForLex(commit);
  blocks.set(commitCid, commitBytes);
  return ready('#commit', {
    rebase: false,
    tooBig: false,
    repo: did,
    commit: commitCid,
    rev,
    since: null,
    blocks: await blocksToCarFile(commitCid, blocks),
    ops: [{ action: 'create', path, cid: recordCid }],
    blobs: [],
    time: now,
  });
}

/**
 * `count` frames over `accounts` distinct accounts, in the network's mix: likes, posts, follows,
 * reposts and profile updates as commits, 1.5 % identity and 1.5 % account events. `keys`, when
 * given, is filled with each account's DID and the did:key of the key its commits are signed with.
 */
export async function networkFrames(
  count: number,
  accounts: number,
  progress: (done: number) => void = () => {},
  keys?: Map<string, string>,
): Promise<ReadyFrame[]> {
  const out: ReadyFrame[] = [];
  const total = KINDS.reduce((n, k) => n + k.weight, 0);
  // Kept only when accounts repeat: 100,000 accounts make 100,000 keys, each used once.
  const made = new Map<number, Secp256k1Keypair>();
  const keyOf = async (i: number): Promise<Secp256k1Keypair> => {
    const known = made.get(i);
    if (known !== undefined) return known;
    const key = await Secp256k1Keypair.create();
    if (count > accounts) made.set(i, key);
    keys?.set(fakeDid(i), key.did());
    return key;
  };
  for (let n = 0; n < count; n++) {
    const i = n % accounts;
    const r = (n * 7919) % 1000;
    const time = new Date().toISOString();
    if (r < 15) out.push(ready('#identity', { did: fakeDid(i), time, handle: `a${i}.bench.test` }));
    else if (r < 30) out.push(ready('#account', { did: fakeDid(i), time, active: true }));
    else {
      let w = (n * 104729) % total;
      const kind = KINDS.find((k) => (w -= k.weight) < 0) ?? KINDS[0];
      out.push(await commitFrame(i, kind.collection, await keyOf(i)));
    }
    if ((n + 1) % 10_000 === 0) progress(n + 1);
  }
  return out;
}

/**
 * The frames, from a file made by an earlier run when there is one (making 100,000 accounts' keys
 * and signed commits with @atproto/crypto's pure-JS signer takes minutes on a loaded machine): each frame as its length, its sequence
 * number's offset (4 bytes each) and its bytes.
 */
export async function cachedNetworkFrames(
  file: string,
  count: number,
  accounts: number,
  progress: (done: number) => void,
): Promise<ReadyFrame[]> {
  if (fs.existsSync(file)) {
    const all = fs.readFileSync(file);
    const out: ReadyFrame[] = [];
    for (let at = 0; at < all.length;) {
      const len = all.readUInt32BE(at);
      const seqAt = all.readUInt32BE(at + 4);
      out.push({ bytes: Buffer.from(all.subarray(at + 8, at + 8 + len)), seqAt });
      at += 8 + len;
    }
    return out;
  }
  const made = await networkFrames(count, accounts, progress);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const parts: Buffer[] = [];
  for (const f of made) {
    const head = Buffer.alloc(8);
    head.writeUInt32BE(f.bytes.length, 0);
    head.writeUInt32BE(f.seqAt, 4);
    parts.push(head, f.bytes);
  }
  fs.writeFileSync(`${file}.tmp`, Buffer.concat(parts));
  fs.renameSync(`${file}.tmp`, file);
  return made;
}
