// A record read with its proof (format.md, "The ref table", "Verified"): com.atproto.sync.getRecord
// answers with a CAR holding the account's signed commit and the Merkle search tree's path down to
// the record's key. The record is used only when the commit is signed by the `#atproto` key of the
// account's DID document, is the account's, and its tree leads to the key (or proves it absent).
// The checks are records/proof.ts's, loaded with their libraries by the first verified read.
import { KnotlessError, isKnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import { atprotoData, fetchPlcDocument } from '../identity/did-doc.ts';
import type { PreviousKey } from '../identity/plc-log.ts';
import { tidMicros } from '../tid.ts';
import { XrpcError, generalFailure, type XrpcClient } from '../xrpc/client.ts';
import { BodyTooLarge } from '../xrpc/http-pool.ts';
import { isTransient } from '../xrpc/retry.ts';
import { fetchOver, type Transport } from '../xrpc/transport.ts';
import type { Commit } from './proof.ts';
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
  /**
   * A client of `pds` the reads go through, when the caller has one: a fault that may pass (a 5xx, a
   * 429, a connection dropped or an answer cut short) is then retried as every other read of the
   * command is, and waited out or said as such, instead of failing the read at once. Without one the
   * reads go once over `transport`.
   */
  client?: XrpcClient;
  did: string;
  collection: string;
  rkey: string;
  /**
   * The `#atproto` verification method of the account's DID document, as a `did:key`; undefined
   * only with verification turned off (KNOTLESS_VERIFY=0): the proof's commit is then taken whoever
   * signed it, whichever account it names, and only its tree is walked to the record.
   */
  signingKey: string | undefined;
  /** How messages name what was read (the repository, `alice.example/project`). */
  name: string;
  /**
   * The key `signingKey` replaced, with when (identity/plc-log.ts), asked only when the commit is
   * not signed by `signingKey`: a commit made before the replacement and signed by that key is
   * genuine (after a move the new PDS serves the old PDS's commit until the account writes again).
   */
  previousKey?: () => Promise<PreviousKey | undefined>;
  signal?: AbortSignal;
  /**
   * Given the proof's checked tree (its commit's `data` root and the CAR's blocks) once the record
   * is read from it: a reader that must show a range of keys complete walks the proofs' nodes.
   */
  keep?: (tree: ProofTree) => void;
  /**
   * The proof is wanted only if the PDS gives it (the ends of a listing's range, whose nodes can be
   * read by CID instead): an HTTP 400 answer (a key the PDS will not look up, or an absence it
   * answers with an error) is refused at once ({@link answeredNoProof}) instead of reading the
   * account's whole repository to look the key up.
   */
  optional?: boolean;
}

/** A checked proof's tree: the signed commit's, its root, and the blocks it came with. */
export interface ProofTree {
  rev: string;
  commit: string;
  data: Commit['data'];
  blocks: Map<string, Uint8Array>;
}

/** The cause of a refusal where the PDS answered with an error instead of any proof. */
class NoProof extends Error {
  readonly status: number;
  constructor(status: number) {
    super(`HTTP ${status} instead of a proof`);
    this.status = status;
  }
}

/**
 * Whether `err` is a refusal because the PDS answered an error instead of a proof (as opposed to a
 * proof that did not hold): a reader that has a plainer sentence for the same PDS's failure (the
 * account or repository is not there) may say that one instead; either way nothing is used.
 * `status`: that error's HTTP status only.
 */
export function answeredNoProof(err: unknown, status?: number): boolean {
  return (
    isKnotlessError(err, 'unverified-remote') &&
    err.cause instanceof NoProof &&
    (status === undefined || err.cause.status === status)
  );
}

/** Why each refusal made here was made, as data (see {@link refusalReason}). */
const reasons = new WeakMap<Error, string>();

/** A refusal of a proof of `name`'s refs, for the reason `what`, with the failure under it. */
export function unverified(name: string, what: string, cause?: unknown): KnotlessError {
  const err = new KnotlessError(
    'unverified-remote',
    `The ref table of ${safeText(name, 200)} could not be verified (${what}); nothing from it was used, so check the PDS or the network in between and try again.`,
    cause === undefined ? undefined : { cause },
  );
  reasons.set(err, what);
  return err;
}

/**
 * Why a proof was refused (`the proof is another account's commit`…), when `err` is such a
 * refusal; undefined for any other failure. `knotless verify` says it of each ref.
 */
export function refusalReason(err: unknown): string | undefined {
  return err instanceof Error ? reasons.get(err) : undefined;
}

/**
 * The `#atproto` signing key of an account's DID document, as a `did:key`: a `did:plc` document read
 * from the PLC directory at `plcUrl` and its key read by records/proof.ts (loading @atproto/identity
 * would cost a cold listing more CPU than the rest of it), a `did:web` through @atproto/identity. A
 * document that cannot be read, or names no key, leaves nothing to verify against.
 */
export async function accountSigningKey(
  transport: Transport,
  did: string,
  plcUrl: string,
  name: string,
): Promise<string> {
  return (await accountKey(transport, did, plcUrl, name)).key;
}

/**
 * {@link accountSigningKey}, with the PDS the same document names (a `did:web`'s is left undefined:
 * the library that reads its document gives only the key). `read` is a did:plc document this
 * command's resolution of the account read already (IdentityResolver.documentRead): used instead of
 * reading it again, unless it came to nothing.
 */
export async function accountKey(
  transport: Transport,
  did: string,
  plcUrl: string,
  name: string,
  read?: Promise<unknown>,
): Promise<{ key: string; pds: string | undefined }> {
  let key: string | undefined;
  let pds: string | undefined;
  try {
    if (did.startsWith('did:plc:')) {
      const doc =
        (read === undefined ? undefined : await read) ??
        (await fetchPlcDocument(transport, plcUrl, did, AbortSignal.timeout(10_000)));
      if (doc === null) throw new Error('the PLC directory has no such DID');
      pds = atprotoData(did, doc).pds;
      key = (await import('./proof.ts')).atprotoSigningKey(did, doc);
    } else {
      const { DidResolver } = await import('@atproto/identity');
      // Our transport, as the identity resolver's: KNOTLESS_CA_CERTS applies and a dev PLC on loopback
      // is reachable (the library's own fetch refuses private addresses).
      const resolver = new DidResolver({ plcUrl, timeout: 10_000, fetch: fetchOver(transport) });
      key = await resolver.resolveAtprotoKey(did, true);
    }
  } catch (err) {
    throw new KnotlessError(
      'unverified-remote',
      `The DID document of ${safeText(name, 200)}'s account could not be read, so its ref table cannot be verified; check the network and try again.`,
      { cause: err },
    );
  }
  if (key === undefined) throw unverified(name, 'its DID document names no signing key');
  return { key, pds };
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
  const res = await fetchCar(req, url, RECORD_ANSWER_BYTES + 64 * 1024);
  let body: Uint8Array = res.body;
  if (res.status === 400 && req.optional === true)
    throw unverified(
      req.name,
      `the PDS answered HTTP ${res.status} instead of a proof`,
      new NoProof(res.status),
    );
  if ((res.status < 200 || res.status > 299) && recordNotFound(res.status, res.body))
    // A PDS that answers a record's absence with an error instead of its proof: the error proves
    // nothing, so the account's whole signed repository is read and the key looked up in its tree.
    body = await wholeRepository(req);
  else if (res.status < 200 || res.status > 299)
    throw unverified(
      req.name,
      `the PDS answered HTTP ${res.status} instead of a proof`,
      new NoProof(res.status),
    );
  const { commitSigned, decodeBlock, jsonForm, readCar, readCommit, treeGet } = await import('./proof.ts');
  let car: ReturnType<typeof readCar>;
  try {
    car = readCar(new Uint8Array(body));
  } catch (err) {
    throw unverified(req.name, 'its proof is not a CAR whose blocks match their CIDs', err);
  }
  let commit: Commit;
  try {
    commit = readCommit(car.blocks.get(car.root.toString()));
  } catch (err) {
    throw unverified(req.name, 'its proof holds no commit', err);
  }
  if (req.signingKey !== undefined)
    await checkCommit(commit, car.root.toString(), req, req.signingKey, commitSigned);
  let found: ReturnType<typeof treeGet>;
  let value: unknown;
  try {
    found = treeGet(car.blocks, commit.data, `${req.collection}/${req.rkey}`);
    if (found !== null) {
      const block = car.blocks.get(found.toString());
      if (block === undefined) throw new Error('the record block is missing');
      value = jsonForm(decodeBlock(block));
    }
  } catch (err) {
    throw unverified(req.name, "the proof lacks the tree's path to the record", err);
  }
  const at = { rev: commit.rev, commit: car.root.toString() };
  req.keep?.({ ...at, data: commit.data, blocks: car.blocks });
  if (found === null) return { found: false, ...at };
  return { found: true, value, cid: found.toString(), ...at };
}

/** What a read of blocks by CID needs: where, through what, whose, and how to name it. */
export type BlockReadRequest = Pick<
  VerifiedReadRequest,
  'transport' | 'pds' | 'client' | 'did' | 'name' | 'signal'
>;

/**
 * The blocks `cids` name, read with com.atproto.sync.getBlocks from the account's repository in one
 * request of at most `maxBytes`, each checked to hash to its CID (a block the answer has that was not
 * asked for is dropped); undefined when the PDS answered an error instead (it may no longer hold
 * them: a commit since drops the nodes it replaced). An answer past `maxBytes` throws `tooLarge`'s
 * error; one that is not a CAR of matching blocks is refused with one sentence.
 */
export async function readBlocks(
  req: BlockReadRequest,
  cids: readonly string[],
  maxBytes: number,
  tooLarge: (err: BodyTooLarge) => Error,
): Promise<Map<string, Uint8Array> | undefined> {
  const url = new URL('/xrpc/com.atproto.sync.getBlocks', req.pds);
  url.searchParams.set('did', req.did);
  for (const cid of cids) url.searchParams.append('cids', cid);
  const res = await fetchCar(req, url, maxBytes, tooLarge);
  if (res.status < 200 || res.status > 299) return undefined;
  const { readCarBlocks } = await import('./proof.ts');
  let blocks: Map<string, Uint8Array>;
  try {
    blocks = readCarBlocks(new Uint8Array(res.body)).blocks;
  } catch (err) {
    throw unverified(
      req.name,
      "the blocks of the account's tree are not a CAR whose blocks match their CIDs",
      err,
    );
  }
  const asked = new Set(cids);
  for (const cid of blocks.keys()) if (!asked.has(cid)) blocks.delete(cid);
  return blocks;
}

/**
 * The most of an account's repository (com.atproto.sync.getRepo) read to prove a record absent when
 * its PDS answers RecordNotFound instead of a proof: the whole signed tree stands in for the path.
 */
export const WHOLE_REPOSITORY_BYTES = 64 * 1024 * 1024;

/** Whether an error answer is XRPC's RecordNotFound (400), read from its JSON body. */
function recordNotFound(status: number, body: Uint8Array): boolean {
  if (status !== 400) return false;
  try {
    return (
      (JSON.parse(Buffer.from(body).toString('utf8')) as { error?: unknown } | null)?.error ===
      'RecordNotFound'
    );
  } catch (err) {
    // Not JSON: not the error a PDS sends for an absent record, and refused as any other error.
    if (err instanceof SyntaxError) return false;
    throw err;
  }
}

/**
 * GETs `url` from the account's PDS as a CAR of at most `maxBytes`. A transport failure is the PDS
 * unreachable, in one sentence; so is an answer past the bound, unless `tooLarge` says what it is.
 */
async function fetchCar(
  req: BlockReadRequest,
  url: URL,
  maxBytes: number,
  tooLarge?: (err: BodyTooLarge) => Error,
): Promise<{ status: number; body: Uint8Array }> {
  if (req.client !== undefined) return fetchCarWith(req.client, req.name, url, maxBytes, tooLarge);
  try {
    return await req.transport.request(url, {
      method: 'GET',
      headers: { accept: 'application/vnd.ipld.car' },
      body: null,
      maxBytes,
      signal: req.signal ?? new AbortController().signal,
    });
  } catch (err) {
    if (isKnotlessError(err)) throw err;
    if (err instanceof BodyTooLarge && tooLarge !== undefined) throw tooLarge(err);
    const code = (err as NodeJS.ErrnoException).code;
    throw new KnotlessError(
      'pds-unreachable',
      `The PDS of ${safeText(req.name, 200)} could not be reached to read its ref table${code === undefined ? '' : ` (${safeText(code, 40)})`}; check your network connection and try again.`,
      { cause: err },
    );
  }
}

/**
 * {@link fetchCar} through `client`: its retries and rate-limit waits, and its sentences for a PDS
 * out of reach or failing past them. An error answer that will not pass by itself (a 400, a 404) is
 * handed back, as the transport's would be, for the caller to refuse as no proof.
 */
async function fetchCarWith(
  client: XrpcClient,
  name: string,
  url: URL,
  maxBytes: number,
  tooLarge?: (err: BodyTooLarge) => Error,
): Promise<{ status: number; body: Uint8Array }> {
  const nsid = url.pathname.replace(/^\/xrpc\//, '');
  try {
    return {
      status: 200,
      body: await client.queryBytes(nsid, paramsOf(url), maxBytes),
    };
  } catch (err) {
    if (err instanceof XrpcError) {
      if (isTransient({ status: err.status, headers: err.headers }))
        throw generalFailure(err, `reading the ref table of ${safeText(name, 200)}`);
      const body = Buffer.from(JSON.stringify({ error: err.error, message: err.message }));
      return { status: err.status, body };
    }
    if (isKnotlessError(err) && err.cause instanceof BodyTooLarge && tooLarge !== undefined)
      throw tooLarge(err.cause);
    throw err;
  }
}

/** A URL's query as a client's parameters: one asked more than once (`cids`) as a list. */
function paramsOf(url: URL): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const key of new Set(url.searchParams.keys())) {
    const all = url.searchParams.getAll(key);
    out[key] = all.length === 1 ? all[0]! : all;
  }
  return out;
}

/** The account's whole repository as a CAR, of at most {@link WHOLE_REPOSITORY_BYTES}. */
async function wholeRepository(req: VerifiedReadRequest): Promise<Uint8Array> {
  const url = new URL('/xrpc/com.atproto.sync.getRepo', req.pds);
  url.searchParams.set('did', req.did);
  const res = await fetchCar(req, url, WHOLE_REPOSITORY_BYTES, (err) =>
    unverified(
      req.name,
      `the PDS gave no proof that it is absent, and the account's repository is larger than the ${WHOLE_REPOSITORY_BYTES / 1024 / 1024} MiB knotless reads to check it whole`,
      err,
    ),
  );
  if (res.status < 200 || res.status > 299)
    throw unverified(
      req.name,
      `the PDS gave no proof that it is absent, and answered HTTP ${res.status} instead of the account's repository`,
      new NoProof(res.status),
    );
  return new Uint8Array(res.body);
}

/** Commits (by CID) this process found signed by a key, as `<key> <CID>`: at most {@link SIGNED_KEPT}. */
const SIGNED = new Set<string>();
const SIGNED_KEPT = 1024;

/** Refuses a commit that is not the account's, or not signed by its key (or the one it replaced). */
async function checkCommit(
  commit: Commit,
  cid: string,
  req: VerifiedReadRequest,
  signingKey: string,
  commitSigned: (commit: Commit, didKey: string) => boolean,
): Promise<void> {
  if (commit.did !== req.did) throw unverified(req.name, "the proof is another account's commit");
  // The proofs of one listing mostly carry the same commit: its bytes are fixed by its CID, so its
  // signature by a key is checked once, not once a record.
  const seen = `${signingKey} ${cid}`;
  if (SIGNED.has(seen)) return;
  let signed: boolean;
  try {
    signed = commitSigned(commit, signingKey);
    if (signed) {
      if (SIGNED.size >= SIGNED_KEPT) SIGNED.clear();
      SIGNED.add(seen);
    }
  } catch (err) {
    throw unverified(req.name, "the account's key is of a kind knotless cannot check", err);
  }
  if (!signed && req.previousKey !== undefined) signed = await signedBefore(commit, req, commitSigned);
  if (!signed) throw unverified(req.name, "the commit's signature does not match the account's key");
}

/**
 * Whether `commit` is signed by the key the account's current one replaced and was made before that
 * key was replaced (its revision's time earlier than the replacement). A log that cannot be read
 * leaves the proof refused, with the log's failure as the refusal's cause.
 */
async function signedBefore(
  commit: Commit,
  req: VerifiedReadRequest,
  commitSigned: (commit: Commit, didKey: string) => boolean,
): Promise<boolean> {
  let previous: PreviousKey | undefined;
  try {
    previous = await req.previousKey!();
  } catch (err) {
    throw unverified(
      req.name,
      "the commit's signature does not match the account's key, and its earlier keys could not be read",
      err,
    );
  }
  if (previous === undefined) return false;
  const made = tidMicros(commit.rev);
  const replaced = Date.parse(previous.replacedAt) * 1000;
  if (made === undefined || !Number.isFinite(replaced) || made >= replaced) return false;
  try {
    return commitSigned(commit, previous.key);
  } catch (err) {
    throw unverified(
      req.name,
      "the commit's signature does not match the account's key, and its earlier key is of a kind knotless cannot check",
      err,
    );
  }
}
