// The checks of a com.atproto.sync.getRecord proof (format.md, "The ref table", "Verified"): a CAR
// of DAG-CBOR blocks, the account's signed commit and the Merkle search tree's path to one key. The
// CBOR, CIDs and base58 are libraries' (records/proof-libs.ts); the signature is checked by Node's
// own crypto and the tree walked by the dozen lines below, because the libraries that do those two
// (@atproto/repo and @atproto/crypto, one 617 KB bundle with its secp256k1 maths in JavaScript) cost
// a cold listing about 270 ms of CPU to load and run, more than the rest of the command
// (performance.md, "Verified reads"). The rules are the atproto repository spec's as those libraries
// apply them: anything that does not follow them throws, and the caller refuses the proof.
import crypto from 'node:crypto';
import { CID, Token, Type, base58btc, decode, encode, varint } from './proof-libs.ts';

const CID_TAG = 42;
const SHA2_256 = 0x12;

/** DAG-CBOR as @atproto/lex-cbor decodes it: canonical integers, no indefinite lengths, CIDs as tag 42. */
const DECODE = {
  allowIndefinite: false,
  allowUndefined: false,
  allowNaN: false,
  allowInfinity: false,
  strict: true,
  useMaps: false,
  rejectDuplicateMapKeys: true,
  tags: Object.assign([], {
    [CID_TAG]: (bytes: Uint8Array) => {
      if (bytes[0] !== 0) throw new Error('a CID tag without its leading zero byte');
      return CID.decode(bytes.subarray(1));
    },
  }),
};

/** DAG-CBOR as @atproto/lex-cbor encodes it: cborg's canonical map order, CIDs as tag 42. */
const ENCODE = {
  typeEncoders: {
    Object: (obj: unknown) => {
      const cid = CID.asCID(obj);
      if (cid === null) return null;
      const bytes = new Uint8Array(cid.bytes.byteLength + 1);
      bytes.set(cid.bytes, 1);
      return [new Token(Type.tag, CID_TAG), new Token(Type.bytes, bytes)];
    },
  },
};

/** One DAG-CBOR value filling `bytes`. */
export function decodeBlock(bytes: Uint8Array): unknown {
  return decode(bytes, DECODE);
}

/** A CAR's root and its blocks, each checked to hash to its CID (sha2-256 only, as atproto writes). */
export function readCar(buf: Uint8Array): { root: CID; blocks: Map<string, Uint8Array> } {
  const { root, blocks } = readCarBlocks(buf);
  if (root === null) throw new Error('not a CARv1 with a root');
  return { root, blocks };
}

/**
 * A CAR's blocks, each checked to hash to its CID, whatever roots its header names: what
 * com.atproto.sync.getBlocks answers with (a CAR with no root), and every proof's CAR.
 */
export function readCarBlocks(buf: Uint8Array): { root: CID | null; blocks: Map<string, Uint8Array> } {
  const [headerLength, a] = varint.decode(buf);
  if (a + headerLength > buf.length) throw new Error('the CAR header is cut short');
  const header = decodeBlock(buf.subarray(a, a + headerLength)) as { version?: unknown; roots?: unknown };
  const roots = header?.roots;
  if (header?.version !== 1 || !Array.isArray(roots)) throw new Error('not a CARv1');
  const root = roots.length === 0 ? null : CID.asCID(roots[0]);
  if (roots.length > 0 && root === null) throw new Error('not a CARv1');
  const blocks = new Map<string, Uint8Array>();
  let at = a + headerLength;
  while (at < buf.length) {
    const [length, read] = varint.decode(buf, at);
    const end = at + read + length;
    if (end > buf.length) throw new Error('a block is cut short');
    const [cid, data] = CID.decodeFirst(buf.subarray(at + read, end));
    if (cid.version !== 1 || cid.multihash.code !== SHA2_256) throw new Error('a block of an unknown hash');
    const digest = crypto.createHash('sha256').update(data).digest();
    if (Buffer.compare(digest, cid.multihash.digest) !== 0)
      throw new Error('a block does not hash to its CID');
    blocks.set(cid.toString(), data);
    at = end;
  }
  return { root, blocks };
}

/** A signed repository commit (version 3), as the spec defines it. */
export interface Commit {
  did: string;
  version: 3;
  data: CID;
  rev: string;
  prev: CID | null;
  sig: Uint8Array;
}

/** The commit `block` holds, with exactly the fields of a version 3 commit, or throws. */
export function readCommit(block: Uint8Array | undefined): Commit {
  if (block === undefined) throw new Error('the root block is missing');
  const c = decodeBlock(block) as Record<string, unknown> | null;
  if (
    c === null ||
    typeof c !== 'object' ||
    typeof c['did'] !== 'string' ||
    c['version'] !== 3 ||
    CID.asCID(c['data']) === null ||
    typeof c['rev'] !== 'string' ||
    !(c['prev'] === null || CID.asCID(c['prev']) !== null) ||
    !(c['sig'] instanceof Uint8Array) ||
    Object.keys(c).length !== 6
  )
    throw new Error('not a version 3 commit');
  return c as unknown as Commit;
}

const CURVES = [
  // did:key's multicodec prefixes (secp256k1-pub, p256-pub), each with the DER prefix of a compressed
  // public key and half its group order: a signature whose s is above it is refused (low-S only).
  {
    prefix: [0xe7, 0x01],
    spki: '3036301006072a8648ce3d020106052b8104000a032200',
    half: 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n >> 1n,
  },
  {
    prefix: [0x80, 0x24],
    spki: '3039301306072a8648ce3d020106082a8648ce3d030107032200',
    half: 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n >> 1n,
  },
] as const;

/**
 * Whether the commit's `sig` is `didKey`'s signature of it: ECDSA over the sha-256 of the commit
 * without `sig` in DAG-CBOR, in the compact 64-byte form with a low s, as @atproto/crypto accepts
 * by default. A key that is not a compressed secp256k1 or P-256 `did:key` throws.
 */
export function commitSigned(commit: Commit, didKey: string): boolean {
  if (!didKey.startsWith('did:key:')) throw new Error('not a did:key');
  const bytes = base58btc.decode(didKey.slice('did:key:'.length));
  const curve = CURVES.find((c) => bytes[0] === c.prefix[0] && bytes[1] === c.prefix[1]);
  if (curve === undefined || bytes.length !== 35)
    throw new Error('a key of a kind atproto does not sign with');
  const key = crypto.createPublicKey({
    key: Buffer.concat([Buffer.from(curve.spki, 'hex'), bytes.subarray(2)]),
    format: 'der',
    type: 'spki',
  });
  const { sig, ...unsigned } = commit;
  if (sig.length !== 64) return false;
  if (BigInt(`0x${Buffer.from(sig.subarray(32)).toString('hex')}`) > curve.half) return false;
  return crypto.verify('sha256', encode(unsigned, ENCODE), { key, dsaEncoding: 'ieee-p1363' }, sig);
}

const MAX_DEPTH = 64;

/**
 * Walks the Merkle search tree from `root` to `key`: the CID the tree holds for it, or null when the
 * path proves it absent. A node of the path missing from `blocks`, or malformed, throws.
 */
export function treeGet(blocks: Map<string, Uint8Array>, root: CID, key: string): CID | null {
  const target = Buffer.from(key, 'utf8');
  let link: CID | null = root;
  for (let depth = 0; link !== null; depth++) {
    if (depth > MAX_DEPTH) throw new Error('the tree is too deep');
    const bytes = blocks.get(link.toString());
    if (bytes === undefined) throw new Error("a node of the tree's path is missing");
    const node = treeNode(decodeBlock(bytes));
    // The subtree left of the first entry greater than the key (or right of the last): the only
    // place the key can be.
    let next = node.left;
    for (const entry of treeEntries(node.entries)) {
      const order = Buffer.compare(target, entry.key);
      if (order === 0) return entry.value;
      if (order < 0) break;
      next = entry.right;
    }
    link = next;
  }
  return null;
}

/** A decoded block as a tree node: its left subtree's link and its entries, unread; anything else throws. */
function treeNode(decoded: unknown): { left: CID | null; entries: unknown[] } {
  const node = decoded as { l?: unknown; e?: unknown } | null;
  if (node === null || typeof node !== 'object' || !Array.isArray(node.e) || node.l === undefined)
    throw new Error('not a tree node');
  const left = node.l === null ? null : CID.asCID(node.l);
  if (node.l !== null && left === null) throw new Error('not a tree node');
  return { left, entries: node.e };
}

/**
 * A node's entries in order, each checked as it is reached (so a walk that stops early reads no
 * further): its whole key (the shared prefix of the one before, then its own part), which must
 * follow that one's, the record's CID, and the link of the subtree to its right. One that does not
 * hold throws.
 */
function* treeEntries(entries: unknown[]): Generator<{ key: Buffer; value: CID; right: CID | null }> {
  let previous = Buffer.alloc(0);
  for (const entry of entries as Array<Record<string, unknown> | null>) {
    const p = entry?.['p'];
    const k = entry?.['k'];
    const v = CID.asCID(entry?.['v']);
    const t = entry?.['t'] === null ? null : CID.asCID(entry?.['t']);
    if (
      typeof p !== 'number' ||
      !(k instanceof Uint8Array) ||
      v === null ||
      (t === null && entry?.['t'] !== null) ||
      p > previous.length
    )
      throw new Error('not a tree entry');
    const full = Buffer.concat([previous.subarray(0, p), k]);
    if (previous.length > 0 && Buffer.compare(full, previous) <= 0)
      throw new Error('tree entries out of order');
    previous = full;
    yield { key: full, value: v, right: t };
  }
}

/** Bytes in the JSON form records are read in: base64 without padding, under `$bytes`. */
function bytesJson(bytes: Uint8Array): { $bytes: string } {
  return { $bytes: Buffer.from(bytes).toString('base64').replace(/=+$/, '') };
}

/** A record block decoded to the JSON form records are read in: bytes as `$bytes`, CIDs as `$link`. */
export function jsonForm(value: unknown): unknown {
  if (value instanceof Uint8Array) return bytesJson(value);
  if (Array.isArray(value)) return value.map(jsonForm);
  if (typeof value !== 'object' || value === null) return value;
  const cid = CID.asCID(value);
  if (cid !== null) return { $link: cid.toString() };
  return Object.fromEntries(Object.entries(value).map(([k, x]) => [k, jsonForm(x)]));
}

/**
 * The CID a PDS gives a record written in this JSON form (a DAG-CBOR block, sha2-256): a ref
 * table names each of its parts by it, before they are written, so that a reader can check them.
 */
export function recordCid(json: Record<string, unknown>): string {
  // Through JSON first: what is sent is JSON, where an undefined field is no field at all.
  const bytes = encode(bothForms(JSON.parse(JSON.stringify(json))).data, ENCODE);
  const digest = crypto.createHash('sha256').update(bytes).digest();
  // A CIDv1, dag-cbor (0x71), sha2-256 (0x12, 32 bytes): as atproto writes every record's.
  const cid = Uint8Array.of(0x01, 0x71, SHA2_256, 32, ...digest);
  return CID.decode(cid).toString();
}

/**
 * The links and bytes of the records of one listing, read once each, by their JSON spelling: a
 * listing's records name the same packs over and over (each ref's record lists every pack its
 * target reaches). Both forms made of one spelling are the same whichever record holds it.
 */
export interface LeafMemo {
  links: Map<string, { data: CID; spelled: string }>;
  bytes: Map<string, { data: Uint8Array; spelled: string }>;
}

/** A memo for the records of one listing ({@link listedAs}). */
export function leafMemo(): LeafMemo {
  return { links: new Map(), bytes: new Map() };
}

/** Sets `key` of `into` as a field of its own: a key such as __proto__ stays a field of the record. */
function put(into: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__')
    Object.defineProperty(into, key, { value, enumerable: true, writable: true, configurable: true });
  else into[key] = value;
}

/**
 * A record's JSON form back to its DAG-CBOR data (`$link` to a CID, `$bytes` to bytes), and in the
 * same walk the JSON form {@link jsonForm} would make of that data (a link as its CID's string, bytes
 * in base64 without padding), so nothing of how the JSON spelled them is kept. The JSON form is the
 * value itself, or the part of it, that is spelled so already (most of a record is: only links and
 * bytes have other spellings), made anew only where it is not. `memo` keeps the links and bytes read
 * so far. A loop, not maps and entries: this walk was the largest part of a verified listing's CPU.
 */
function bothForms(value: unknown, memo: LeafMemo = leafMemo()): { data: unknown; json: unknown } {
  if (typeof value !== 'object' || value === null) return { data: value, json: value };
  if (Array.isArray(value)) {
    const data: unknown[] = new Array(value.length);
    let json: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const both = bothForms(value[i], memo);
      data[i] = both.data;
      if (both.json !== value[i]) (json ??= value.slice())[i] = both.json;
    }
    return { data, json: json ?? value };
  }
  const keys = Object.keys(value);
  const v = value as Record<string, unknown>;
  if (keys.length === 1 && (keys[0] === '$link' || keys[0] === '$bytes')) {
    const spelled = v[keys[0]];
    if (keys[0] === '$link' && typeof spelled === 'string') {
      let leaf = memo.links.get(spelled);
      if (leaf === undefined) {
        const cid = CID.parse(spelled);
        leaf = { data: cid, spelled: cid.toString() };
        memo.links.set(spelled, leaf);
      }
      return { data: leaf.data, json: leaf.spelled === spelled ? value : { $link: leaf.spelled } };
    }
    if (keys[0] === '$bytes' && typeof spelled === 'string') {
      let leaf = memo.bytes.get(spelled);
      if (leaf === undefined) {
        const bytes = Buffer.from(spelled, 'base64');
        leaf = { data: new Uint8Array(bytes), spelled: bytesJson(bytes).$bytes };
        memo.bytes.set(spelled, leaf);
      }
      return { data: leaf.data, json: leaf.spelled === spelled ? value : { $bytes: leaf.spelled } };
    }
  }
  const data: Record<string, unknown> = {};
  let json: Record<string, unknown> | undefined;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const both = bothForms(v[key], memo);
    put(data, key, both.data);
    if (both.json !== v[key] && json === undefined) {
      json = {};
      for (let j = 0; j < i; j++) put(json, keys[j]!, v[keys[j]!]);
    }
    if (json !== undefined) put(json, key, both.json);
  }
  return { data, json: json ?? value };
}

/**
 * A listed record's value as the block `cid` names holds it, in its JSON form, when the value is
 * that block's (it encodes to bytes hashing to `cid`); undefined when it is not, or is no record.
 * The form given back is the block's own (bytes and links spelled as `jsonForm` spells them), so
 * nothing of how a listing spelled a value that encodes the same is kept. It is made from the data
 * that was encoded, in the same walk, not by decoding the bytes again: the block decodes to that same
 * data (keys aside, in cborg's order), and the decoding was a third of a verified listing's CPU. A
 * CID as the tree holds it is compared by its bytes (no string made of the value's own). `memo`:
 * the links and bytes read of the listing's records so far ({@link LeafMemo}).
 */
export function listedAs(value: unknown, cid: string | CID, memo?: LeafMemo): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  try {
    // A listed value is parsed JSON already: no field is undefined, so it is not put through JSON
    // again as a record to be written is.
    const { data, json } = bothForms(value, memo);
    const bytes = encode(data, ENCODE);
    const digest = crypto.createHash('sha256').update(bytes).digest();
    if (typeof cid !== 'string') {
      const same =
        cid.version === 1 &&
        cid.code === 0x71 &&
        cid.multihash.code === SHA2_256 &&
        Buffer.compare(cid.multihash.digest, digest) === 0;
      return same ? json : undefined;
    }
    const own = CID.decode(Uint8Array.of(0x01, 0x71, SHA2_256, 32, ...digest)).toString();
    return own === cid ? json : undefined;
  } catch (err) {
    // A value no record could be (a link or bytes that do not parse): not the block its CID names.
    if (err instanceof Error) return undefined;
    throw err;
  }
}

const LEGACY_TYPES: Record<string, (typeof CURVES)[number]> = {
  EcdsaSecp256k1VerificationKey2019: CURVES[0],
  EcdsaSecp256r1VerificationKey2019: CURVES[1],
};

/**
 * The `#atproto` key of a DID document as a `did:key` (a compressed point), read as
 * @atproto/identity reads it: a `Multikey`, or the older `EcdsaSecp256k1VerificationKey2019` and
 * `EcdsaSecp256r1VerificationKey2019` (a point, often uncompressed, of the type's curve), each in
 * base58btc. Undefined when the document names no such key; a key that is not a point throws.
 */
export function atprotoSigningKey(did: string, doc: unknown): string | undefined {
  const methods = (doc as { verificationMethod?: unknown } | null)?.verificationMethod;
  if (!Array.isArray(methods)) return undefined;
  const method = (methods as unknown[]).find((m): m is Record<string, unknown> => {
    const id = (m as { id?: unknown } | null)?.id;
    return id === '#atproto' || id === `${did}#atproto`;
  });
  const multibase = method?.['publicKeyMultibase'];
  if (method === undefined || typeof multibase !== 'string') return undefined;
  let bytes = base58btc.decode(multibase);
  let curve: (typeof CURVES)[number] | undefined;
  if (method['type'] === 'Multikey') {
    curve = CURVES.find((c) => bytes[0] === c.prefix[0] && bytes[1] === c.prefix[1]);
    bytes = bytes.subarray(2);
  } else if (typeof method['type'] === 'string' && Object.hasOwn(LEGACY_TYPES, method['type']))
    curve = LEGACY_TYPES[method['type']];
  if (curve === undefined) return undefined;
  // An uncompressed point (0x04, x, y) is compressed: 0x02 or 0x03 by the parity of y, then x.
  if (bytes.length === 65 && bytes[0] === 4)
    bytes = Uint8Array.of(2 + (bytes[64]! & 1), ...bytes.subarray(1, 33));
  if (bytes.length !== 33 || (bytes[0] !== 2 && bytes[0] !== 3)) throw new Error('the key is not a point');
  return `did:key:${base58btc.encode(Uint8Array.of(...curve.prefix, ...bytes))}`;
}

/** A node of the tree a walk of a key range needed and the proofs read did not hold. */
export class NodeMissing extends Error {
  constructor() {
    super("a node of the tree's range is missing");
  }
}

/**
 * Every key of the tree from `root` strictly between `lo` and `hi`, with its CID, in key order,
 * read from `blocks` (nodes each already checked against its CID): {@link treeFrontier}, where a
 * node `blocks` lacks throws {@link NodeMissing}: the keys cannot be told without it.
 */
export function treeRange(
  blocks: Map<string, Uint8Array>,
  root: CID,
  lo: string,
  hi: string,
): Array<{ key: string; cid: CID }> {
  const { found, missing } = treeFrontier(blocks, root, lo, hi);
  if (missing.length > 0) throw new NodeMissing();
  return found;
}

/**
 * The keys of the tree from `root` strictly between `lo` and `hi` that `blocks` reaches, with
 * their CIDs, in key order, and the nodes it lacks (`missing`, as CIDs) that the range goes on
 * into. Each subtree is walked whose span (between the entries on either side of its link) meets
 * the range, and no other: when `missing` is empty, `found` is every key of the range. A node
 * that is malformed, or whose entries are out of order or outside the span its link gives them,
 * throws. `decoded` keeps the nodes decoded by CID across calls (a walk calls this once a level,
 * from the root each time): a node is its bytes', whichever commit reaches it.
 */
export function treeFrontier(
  blocks: Map<string, Uint8Array>,
  root: CID,
  lo: string,
  hi: string,
  decoded: Map<string, unknown> = new Map(),
): { found: Array<{ key: string; cid: CID }>; missing: string[]; holes: Hole[] } {
  const missing: string[] = [];
  const holes: Hole[] = [];
  const low = Buffer.from(lo, 'utf8');
  const high = Buffer.from(hi, 'utf8');
  const out: Array<{ key: string; cid: CID }> = [];
  // A subtree's span is open at both ends (undefined: unbounded); it meets the range when it starts
  // below `hi` and ends above `lo`.
  const meets = (from: Buffer | undefined, to: Buffer | undefined) =>
    (from === undefined || Buffer.compare(from, high) < 0) &&
    (to === undefined || Buffer.compare(to, low) > 0);
  const walk = (
    link: CID,
    from: Buffer | undefined,
    to: Buffer | undefined,
    depth: number,
    layer: number | undefined,
  ): void => {
    if (depth > MAX_DEPTH) throw new Error('the tree is too deep');
    const id = link.toString();
    let node = decoded.get(id);
    if (node === undefined) {
      const bytes = blocks.get(id);
      if (bytes === undefined) {
        missing.push(id);
        holes.push({ cid: link, from, to, layer });
        return;
      }
      node = decodeBlock(bytes);
      decoded.set(id, node);
    }
    const { left, entries } = treeNode(node);
    let below = from;
    let subtree = left;
    // A node's layer is its entries' (an entry-less node's, one below its parent's): its subtrees
    // are one below it, as atproto's tree is built.
    let childLayer = entries.length === 0 && layer !== undefined ? layer - 1 : undefined;
    for (const { key: full, value: v, right: t } of treeEntries(entries)) {
      childLayer ??= keyLayer(full) - 1;
      // An entry outside the span its node was reached by would be a key no search finds where it is.
      if (
        (from !== undefined && Buffer.compare(full, from) <= 0) ||
        (to !== undefined && Buffer.compare(full, to) >= 0)
      )
        throw new Error('a tree entry outside its node');
      if (subtree !== null && meets(below, full)) walk(subtree, below, full, depth + 1, childLayer);
      if (Buffer.compare(full, low) > 0 && Buffer.compare(full, high) < 0)
        out.push({ key: full.toString('utf8'), cid: v });
      below = full;
      subtree = t;
    }
    if (subtree !== null && meets(below, to)) walk(subtree, below, to, depth + 1, childLayer);
  };
  walk(root, undefined, undefined, 0, undefined);
  return { found: out, missing, holes };
}

/**
 * A node a walk of a range needed and lacked: its CID, the span its link gives it (open at both
 * ends; undefined: unbounded) and the layer atproto's tree puts it at (one below its parent's;
 * undefined when that cannot be told).
 */
export interface Hole {
  cid: CID;
  from: Buffer | undefined;
  to: Buffer | undefined;
  layer: number | undefined;
}

/** A CID's string form read back; undefined when it is none. */
export function parseCid(text: string): CID | undefined {
  try {
    return CID.parse(text);
  } catch (err) {
    if (err instanceof Error) return undefined;
    throw err;
  }
}

/** A key's layer in atproto's tree: the leading zero bits of its sha-256, two to a layer (a fanout of 4). */
export function keyLayer(key: Uint8Array): number {
  const digest = crypto.createHash('sha256').update(key).digest();
  let zeros = 0;
  for (const byte of digest) {
    if (byte === 0) {
      zeros += 8;
      continue;
    }
    zeros += Math.clz32(byte) - 24;
    break;
  }
  return zeros >> 1;
}

/**
 * The CID of the subtree atproto's tree builds at `layer` from exactly `keys` (in key order, each
 * with its record's CID): null for no keys, undefined when no tree at that layer can hold them (a
 * key of a higher layer). The tree is deterministic: its nodes follow from the keys alone, each
 * key at its layer, every layer between a node and its keys' present as an entry-less node, each
 * entry's key sharing the prefix of the one before it. So a subtree whose CID a signed node holds
 * is proved to hold exactly these keys when this gives the same CID: no node of it need be read.
 */
export function subtreeCid(
  keys: ReadonlyArray<{ key: Buffer; cid: CID; layer: number }>,
  layer: number,
): CID | null | undefined {
  if (keys.length === 0) return null;
  if (layer < 0) return undefined;
  const entries: Array<{ k: Uint8Array; p: number; t: CID | null; v: CID }> = [];
  let start = 0;
  let left: CID | null | undefined = null;
  let previous: Buffer | undefined;
  const below = (from: number, to: number) => subtreeCid(keys.slice(from, to), layer - 1);
  for (let i = 0; i <= keys.length; i++) {
    const key = keys[i];
    if (key !== undefined && key.layer > layer) return undefined;
    if (key !== undefined && key.layer < layer) continue;
    const sub = below(start, i);
    if (sub === undefined) return undefined;
    if (previous === undefined) left = sub;
    else entries[entries.length - 1]!.t = sub;
    if (key === undefined) break;
    let p = 0;
    if (previous !== undefined)
      while (p < previous.length && p < key.key.length && previous[p] === key.key[p]) p++;
    entries.push({ k: new Uint8Array(key.key.subarray(p)), p, t: null, v: key.cid });
    previous = key.key;
    start = i + 1;
  }
  const bytes = encode({ e: entries, l: left }, ENCODE);
  const digest = crypto.createHash('sha256').update(bytes).digest();
  return CID.decode(Uint8Array.of(0x01, 0x71, SHA2_256, 32, ...digest));
}
