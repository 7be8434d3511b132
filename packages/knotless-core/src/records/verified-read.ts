// A record read with its proof (format.md, "The ref table", "Verified"): com.atproto.sync.getRecord
// answers with a CAR holding the account's signed commit and the Merkle search tree's path down to
// the record's key. The record is used only when the commit is signed by the `#atproto` key of the
// account's DID document, is the account's, and its tree leads to the key (or proves it absent).
// The checks are @atproto/repo's and @atproto/crypto's, loaded only when a read needs them.
import type { Commit } from '@atproto/repo';
import { KnotlessError, isKnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import { fetchOver, type Transport } from '../xrpc/transport.ts';
import { RECORD_ANSWER_BYTES } from './ref-record.ts';

/**
 * A record as its proof shows it (in its JSON form, as getRecord and listRecords give records: bytes
 * as `$bytes`, links as `$link`), or its proved absence; `rev` and `commit` name the signed commit.
 */
export type VerifiedRecord =
  | { found: true; value: unknown; cid: string; rev: string; commit: string }
  | { found: false; rev: string; commit: string };

/** What to read and what to check it against. */
export interface VerifiedReadRequest {
  transport: Transport;
  /** The PDS the account's DID document names. */
  pds: string;
  did: string;
  collection: string;
  rkey: string;
  /** The `#atproto` verification method of the account's DID document, as a `did:key`. */
  signingKey: string;
  /** How messages name what was read (the repository, `alice.example/project`). */
  name: string;
  signal?: AbortSignal;
}

function unverified(name: string, what: string): KnotlessError {
  return new KnotlessError(
    'unverified-remote',
    `The ref table of ${safeText(name, 200)} could not be verified (${what}); nothing from it was used, so check the PDS or the network in between and try again.`,
  );
}

/**
 * The `#atproto` signing key of an account's DID document (`did:plc` from the PLC directory at
 * `plcUrl`, `did:web` from its domain), as @atproto/identity resolves it. A document that cannot be
 * read, or names no key, leaves nothing to verify against.
 */
export async function accountSigningKey(
  transport: Transport,
  did: string,
  plcUrl: string,
  name: string,
): Promise<string> {
  const { DidResolver } = await import('@atproto/identity');
  let key: string | undefined;
  try {
    // Our transport, as the identity resolver's: KNOTLESS_CA_CERTS applies and a dev PLC on loopback
    // is reachable (the library's own fetch refuses private addresses).
    const resolver = new DidResolver({ plcUrl, timeout: 10_000, fetch: fetchOver(transport) });
    key = await resolver.resolveAtprotoKey(did, true);
  } catch (err) {
    throw new KnotlessError(
      'unverified-remote',
      `The DID document of ${safeText(name, 200)}'s account could not be read, so its ref table cannot be verified; check the network and try again.`,
      { cause: err },
    );
  }
  if (key === undefined) throw unverified(name, 'its DID document names no signing key');
  return key;
}

/**
 * Fetches one record with com.atproto.sync.getRecord and verifies its proof: the CAR's blocks hash to
 * their CIDs, its root is a commit of `did` signed by `signingKey`, and the commit's tree holds the
 * key with the record block, or proves it absent. Anything else is refused with one sentence.
 */
export async function verifiedRead(req: VerifiedReadRequest): Promise<VerifiedRecord> {
  const url = new URL('/xrpc/com.atproto.sync.getRecord', req.pds);
  url.searchParams.set('did', req.did);
  url.searchParams.set('collection', req.collection);
  url.searchParams.set('rkey', req.rkey);
  let res: Awaited<ReturnType<Transport['request']>>;
  try {
    res = await req.transport.request(url, {
      method: 'GET',
      headers: { accept: 'application/vnd.ipld.car' },
      body: null,
      maxBytes: RECORD_ANSWER_BYTES + 64 * 1024,
      signal: req.signal ?? new AbortController().signal,
    });
  } catch (err) {
    if (isKnotlessError(err)) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    throw new KnotlessError(
      'pds-unreachable',
      `The PDS of ${safeText(req.name, 200)} could not be reached to read its ref table${code === undefined ? '' : ` (${safeText(code, 40)})`}; check your network connection and try again.`,
      { cause: err },
    );
  }
  if (res.status < 200 || res.status > 299)
    throw unverified(req.name, `the PDS answered HTTP ${res.status} instead of a proof`);
  const repo = await import('@atproto/repo');
  let car: Awaited<ReturnType<typeof repo.readCarWithRoot>>;
  try {
    car = await repo.readCarWithRoot(new Uint8Array(res.body));
  } catch (err) {
    throw new KnotlessError(
      'unverified-remote',
      unverified(req.name, 'its proof is not a CAR whose blocks match their CIDs').message,
      { cause: err },
    );
  }
  const blocks = new repo.MemoryBlockstore(car.blocks);
  let commit: Commit;
  try {
    commit = await blocks.readObj(car.root, repo.def.commit);
  } catch (err) {
    throw new KnotlessError('unverified-remote', unverified(req.name, 'its proof holds no commit').message, {
      cause: err,
    });
  }
  if (commit.did !== req.did) throw unverified(req.name, "the proof is another account's commit");
  if (!(await repo.verifyCommitSig(commit, req.signingKey)))
    throw unverified(req.name, "the commit's signature does not match the account's key");
  let found: Awaited<ReturnType<InstanceType<typeof repo.MST>['get']>>;
  let value: unknown;
  try {
    found = await repo.MST.load(blocks, commit.data).get(repo.formatDataKey(req.collection, req.rkey));
    if (found !== null) value = jsonForm(repo.cborToLexRecord(await blocks.getBytes(found).then(must)));
  } catch (err) {
    throw new KnotlessError(
      'unverified-remote',
      unverified(req.name, "the proof lacks the tree's path to the record").message,
      { cause: err },
    );
  }
  const at = { rev: commit.rev, commit: car.root.toString() };
  if (found === null) return { found: false, ...at };
  return { found: true, value, cid: found.toString(), ...at };
}

/**
 * A record decoded from its block, in the JSON form every reader of records parses: bytes as
 * `{ $bytes }` (base64), CIDs as `{ $link }`, blob references as `{ $type: 'blob', ref, … }`.
 */
function jsonForm(value: unknown): unknown {
  if (value instanceof Uint8Array)
    return { $bytes: Buffer.from(value).toString('base64').replace(/=+$/, '') };
  if (Array.isArray(value)) return value.map(jsonForm);
  if (typeof value !== 'object' || value === null) return value;
  const v = value as { ipld?: () => unknown; asCID?: unknown; toString(): string };
  // A blob reference (its `ipld()` is its stored form) and a CID (which names itself by `asCID`).
  if (typeof v.ipld === 'function') return jsonForm(v.ipld());
  if (v.asCID === value) return { $link: v.toString() };
  return Object.fromEntries(Object.entries(value).map(([k, x]) => [k, jsonForm(x)]));
}

function must(bytes: Uint8Array | null): Uint8Array {
  if (bytes === null) throw new Error('the record block is missing');
  return bytes;
}
