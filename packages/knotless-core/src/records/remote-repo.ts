import { KnotlessError, isKnotlessError } from '../errors.ts';
import type { Identity } from '../identity/resolver.ts';
import { REF_COLLECTION, REPO_COLLECTION, refKeyPrefix } from './collections.ts';
import { listKeyRange } from './list-range.ts';
import { rkeyOf } from './list-records.ts';
import { safeText } from '../text/terminal.ts';
import { XrpcError, generalFailure, type Authorizer, type XrpcClient } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { refKey } from './ref-key.ts';
import { isSealed, newestEpoch, type PrivacyOpener, type RefSealer } from './sealer.ts';
import {
  MAX_RECORD_BYTES,
  RECORD_ANSWER_BYTES,
  parseRefRecord,
  writeRefRecord,
  type RefRecord,
} from './ref-record.ts';

/** A ref record as read: its key, its CID (for compare-and-swap) and its contents. */
export interface RemoteRef {
  key: string;
  cid: string;
  record: RefRecord;
  /** The account revision that wrote it, when known (writes and the event stream say). */
  rev?: string;
}

/** Thrown when a compare-and-swap write found the record changed. */
export class SwapConflict extends Error {
  override name = 'SwapConflict';
}

/** Thrown when the PDS refuses a record key (it filters some words out of keys). */
export class KeyRefused extends Error {
  override name = 'KeyRefused';
}

/**
 * Thrown when the PDS refused a write because a blob its record lists is not stored (a compaction or
 * a rewind elsewhere freed it since the record that listed it was read).
 */
export class BlobMissing extends Error {
  override name = 'BlobMissing';
}

/** One write of an atomic batch. */
export type RefWrite =
  { action: 'create' | 'update'; key: string; record: RefRecord } | { action: 'delete'; key: string };

/**
 * The clients of the owner's PDS that a {@link RemoteRepo} talks through, handed in rather than
 * built here (Context builds them, see `Context.remoteRepo`), so that this layer knows nothing of
 * configuration, agents or connection pools.
 */
export interface RepoClients {
  /** The read-only client (public endpoints). */
  reader: XrpcClient;
  /** A client that writes as `auth`. */
  writer(auth: Authorizer): XrpcClient;
}

/**
 * One repository's records on its owner's PDS: reading refs (public) and writing them (the owner's
 * session). Every method is one request, so callers can count what an operation costs.
 */
export class RemoteRepo {
  readonly owner: Identity;
  readonly name: string;
  readonly #clients: RepoClients;
  readonly #read: XrpcClient;
  /** Reports records that were skipped because they are invalid. */
  readonly #warn: (message: string) => void;
  readonly #opener: PrivacyOpener | undefined;
  /** A private repository's sealer; null once known public; undefined while unknown. */
  #sealer: RefSealer | null | undefined;

  constructor(
    clients: RepoClients,
    owner: Identity,
    name: string,
    warn: (message: string) => void,
    opener?: PrivacyOpener,
  ) {
    this.#clients = clients;
    this.owner = owner;
    this.name = name;
    this.#read = clients.reader;
    this.#warn = warn;
    this.#opener = opener;
    // Without an opener (the appview, a test), records are only ever read, never opened.
    if (opener === undefined) this.#sealer = null;
  }

  /**
   * Finds out, once, whether the repository is private (and opens it), from what a listing showed;
   * `none` when nothing was listed. A write calls it first, so nothing is written in the clear
   * before the question is settled.
   */
  async prepare(seen: 'sealed' | 'plain' | 'none' = 'none', epoch = 0): Promise<void> {
    if (this.#sealer !== undefined) return;
    this.#sealer = (await this.#opener?.(seen, epoch)) ?? null;
  }

  /** True for a private repository (after {@link prepare} or a listing). */
  get isPrivate(): boolean {
    return this.#sealer !== null && this.#sealer !== undefined;
  }

  /** The sealer of a private repository, after {@link prepare}; undefined for a public one. */
  get sealer(): RefSealer | undefined {
    if (this.#sealer === undefined) throw new Error(`the privacy of ${this.label} is not known yet`);
    return this.#sealer ?? undefined;
  }

  /** The record key of `ref`: readable for a public repository, a keyed hash for a private one. */
  refKey(ref: string): string {
    return this.sealer?.refKey(ref) ?? refKey(this.name, ref);
  }

  /** The record as written to the PDS: sealed for a private repository. */
  #value(key: string, record: RefRecord): Record<string, unknown> {
    return this.sealer?.seal(key, record) ?? writeRefRecord(record);
  }

  /** A client that writes as `auth`. */
  writer(auth: Authorizer): XrpcClient {
    return this.#clients.writer(auth);
  }

  /** The read-only client (public endpoints). */
  get reader(): XrpcClient {
    return this.#read;
  }

  /**
   * Every valid ref record of the repository: one request per 100 refs, past the first page read
   * from both ends at once (list-range.ts). Two records that claim one
   * ref (an encoded and a hashed key) are both returned, and warned of once; {@link refsByName}
   * leaves such a ref out, so that nothing ever picks one of them.
   */
  async listRefs(): Promise<RemoteRef[]> {
    const prefix = refKeyPrefix(this.name);
    const out: RemoteRef[] = [];
    try {
      const listed = await listKeyRange(this.#read, this.owner.did, REF_COLLECTION, prefix);
      const values = listed.map((r) => r.value);
      if (listed.length > 0)
        await this.prepare(values.some(isSealed) ? 'sealed' : 'plain', newestEpoch(values));
      for (const r of listed) {
        const ref = this.#parse(rkeyOf(r.uri), r.cid, r.value);
        if (ref !== undefined) out.push(ref);
      }
    } catch (err) {
      throw generalFailure(err, `listing the refs of ${this.label}`);
    }
    for (const [name, claims] of refsByName(out).contested) this.#warn(contestedSentence(name, claims));
    return out;
  }

  /** One ref record by key, or undefined when there is none. */
  async getRef(key: string): Promise<RemoteRef | undefined> {
    try {
      const res = await this.#read.query<{ cid: string; value: unknown }>(
        'com.atproto.repo.getRecord',
        { repo: this.owner.did, collection: REF_COLLECTION, rkey: key },
        RECORD_ANSWER_BYTES,
      );
      await this.prepare(isSealed(res.value) ? 'sealed' : 'plain', newestEpoch([res.value]));
      return this.#parse(key, res.cid, res.value);
    } catch (err) {
      if (err instanceof XrpcError && pdsRefusal(err) === 'record-missing') return undefined;
      throw generalFailure(err, `reading a ref of ${this.label}`);
    }
  }

  /** True when the repository record exists. */
  async exists(): Promise<boolean> {
    try {
      const res = await this.#read.query<{ value?: { private?: unknown } }>('com.atproto.repo.getRecord', {
        repo: this.owner.did,
        collection: REPO_COLLECTION,
        rkey: this.name,
      });
      // The record says whether the repository is private: settled here, at no extra request.
      await this.prepare(res.value?.private === undefined ? 'plain' : 'none');
      return true;
    } catch (err) {
      if (err instanceof XrpcError && pdsRefusal(err) === 'record-missing') return false;
      throw generalFailure(err, `reading ${this.label}`);
    }
  }

  /**
   * The account's commit a listing given to git was read at, when that listing was not read just now
   * (the warm agent's view): ref writes carry it as `swapCommit` until one lands, which proves the
   * whole listing was still true (`proven`); a refused one leaves it `broken`, and the writes go on
   * with `swapRecord` alone. The helper reads once before exiting unless it was proven.
   */
  viewProof: { commit: string; state: 'pending' | 'proven' | 'broken' } | undefined;

  /** `swapCommit` for the next ref write, while the listing's commit waits for its proof. */
  #proofFields(): { swapCommit?: string } {
    return this.viewProof?.state === 'pending' ? { swapCommit: this.viewProof.commit } : {};
  }

  /** Settles the listing's proof from a ref write's outcome. */
  #settleProof(carried: boolean, err?: unknown): void {
    if (!carried || this.viewProof === undefined) return;
    if (err === undefined) this.viewProof.state = 'proven';
    else if (err instanceof SwapConflict && this.viewProof.state === 'pending')
      this.viewProof.state = 'broken';
  }

  /** Writes a ref record if its current CID is `swap` (null: if it does not exist). Returns the new CID and revision. */
  async putRef(
    auth: Authorizer,
    key: string,
    record: RefRecord,
    swap: string | null,
  ): Promise<{ cid: string; rev: string }> {
    await this.prepare();
    const proof = this.#proofFields();
    try {
      const res = await this.writer(auth).procedure<{ cid: string; commit?: { rev?: string } }>(
        'com.atproto.repo.putRecord',
        {
          repo: this.owner.did,
          collection: REF_COLLECTION,
          rkey: key,
          record: this.#value(key, record),
          swapRecord: swap,
          ...proof,
        },
      );
      this.#settleProof(proof.swapCommit !== undefined);
      return { cid: res.cid, rev: res.commit?.rev ?? '' };
    } catch (err) {
      const failure = writeFailure(err, `writing the refs of ${this.label}`, record.ref);
      this.#settleProof(proof.swapCommit !== undefined, failure);
      throw failure;
    }
  }

  /** Deletes a ref record if its current CID is `swap`. */
  async deleteRef(auth: Authorizer, key: string, swap: string): Promise<void> {
    const proof = this.#proofFields();
    try {
      await this.writer(auth).procedure('com.atproto.repo.deleteRecord', {
        repo: this.owner.did,
        collection: REF_COLLECTION,
        rkey: key,
        swapRecord: swap,
        ...proof,
      });
      this.#settleProof(proof.swapCommit !== undefined);
    } catch (err) {
      const failure = writeFailure(err, `writing the refs of ${this.label}`);
      this.#settleProof(proof.swapCommit !== undefined, failure);
      throw failure;
    }
  }

  /** The account's current commit CID, for an atomic batch's swapCommit. */
  async latestCommit(): Promise<string> {
    try {
      const res = await this.#read.query<{ cid: string }>('com.atproto.sync.getLatestCommit', {
        did: this.owner.did,
      });
      return res.cid;
    } catch (err) {
      throw generalFailure(
        err,
        `reading the latest commit of ${safeText(this.owner.handle ?? this.owner.did)}`,
      );
    }
  }

  /** Applies writes in one commit, only if the account is still at `swapCommit`. */
  async applyWrites(auth: Authorizer, writes: RefWrite[], swapCommit: string): Promise<void> {
    await this.prepare();
    try {
      await this.writer(auth).procedure('com.atproto.repo.applyWrites', {
        repo: this.owner.did,
        swapCommit,
        writes: writes.map((w) =>
          w.action === 'delete'
            ? { $type: 'com.atproto.repo.applyWrites#delete', collection: REF_COLLECTION, rkey: w.key }
            : {
                $type: `com.atproto.repo.applyWrites#${w.action}`,
                collection: REF_COLLECTION,
                rkey: w.key,
                value: this.#value(w.key, w.record),
              },
        ),
      });
    } catch (err) {
      throw writeFailure(err, `the atomic update of ${this.label}`);
    }
  }

  /**
   * Creates ref records in one commit, without `swapCommit`: the PDS refuses a create whose key
   * exists (its repository tree will not add a key twice), so the whole batch lands only if none of
   * them existed. Returns, for each create, its CID and revision when it is known written, undefined
   * otherwise (the caller writes those one by one, whose compare-and-swap sorts them out). When the
   * batch fails, it may still have landed (the answer was lost): the refs are read back, and every
   * record that is exactly ours (same contents, same `updatedAt`) counts as written.
   */
  async createRefs(
    auth: Authorizer,
    creates: { key: string; record: RefRecord }[],
  ): Promise<({ cid: string; rev?: string } | undefined)[]> {
    await this.prepare();
    try {
      const res = await this.writer(auth).procedure<{
        commit?: { rev?: string };
        results?: { cid?: string }[];
      }>('com.atproto.repo.applyWrites', {
        repo: this.owner.did,
        writes: creates.map((c) => ({
          $type: 'com.atproto.repo.applyWrites#create',
          collection: REF_COLLECTION,
          rkey: c.key,
          value: this.#value(c.key, c.record),
        })),
      });
      const cids = (res.results ?? []).map((r) => r.cid);
      const rev = res.commit?.rev;
      if (cids.length === creates.length && rev !== undefined && cids.every((c) => c !== undefined))
        return cids.map((cid) => ({ cid: cid, rev }));
    } catch (err) {
      // A refusal is an answer: the batch did not land. Anything else (no answer) is read back.
      if (err instanceof XrpcError && err.status !== undefined && err.status < 500)
        return creates.map(() => undefined);
      if (!(err instanceof XrpcError) && !isKnotlessError(err)) throw err;
    }
    const now = new Map((await this.listRefs()).map((r) => [r.key, r]));
    return creates.map((c) => {
      const found = now.get(c.key);
      return found !== undefined && sameRecord(found.record, c.record) ? { cid: found.cid } : undefined;
    });
  }

  /** `handle/name`, for messages (escaped: the handle comes from the network). */
  get label(): string {
    return `${safeText(this.owner.handle ?? this.owner.did)}/${safeText(this.name)}`;
  }

  #parse(key: string, cid: string, value: unknown): RemoteRef | undefined {
    try {
      // Measured before parsing, so that an oversized record costs no more than its download.
      const size = JSON.stringify(value)?.length ?? 0;
      if (size > MAX_RECORD_BYTES)
        throw new KnotlessError(
          'corrupt-remote',
          `The remote holds a ref record of ${size} bytes, over the limit of ${MAX_RECORD_BYTES}; it was ignored.`,
        );
      // Without its CID a record cannot be compare-and-swapped: never write on a guess.
      if (typeof cid !== 'string' || cid === '')
        throw new KnotlessError(
          'corrupt-remote',
          'The remote holds a ref record listed without its CID; it was ignored.',
        );
      const sealer = this.#sealer ?? undefined;
      if (sealer === undefined && isSealed(value))
        throw new KnotlessError(
          'corrupt-remote',
          'The remote holds a sealed ref record in a repository that is not private; it was ignored.',
        );
      if (sealer !== undefined && !isSealed(value))
        throw new KnotlessError(
          'corrupt-remote',
          'The remote holds a plain ref record in a private repository; it was ignored.',
        );
      // A sealed record that does not open is refused outright, not skipped: see #open.
      const record =
        sealer !== undefined && isSealed(value) ? opened(sealer, key, value) : parseRefRecord(value);
      // A record under this repository's keys that claims another repository is not one of its refs.
      if (record.repo !== this.name)
        throw new KnotlessError(
          'corrupt-remote',
          `The remote holds an invalid ref record (it names repository "${safeText(record.repo, 100)}"); it was ignored.`,
        );
      return { key, cid, record };
    } catch (err) {
      if (!isKnotlessError(err) || err instanceof SealBroken) throw err;
      this.#warn(`${err.message.replace(/\.$/, '')} (record ${safeText(key, 100)})`);
      return undefined;
    }
  }
}

/** A sealed record that did not open: the whole read fails (a hostile PDS must not pick our refs). */
class SealBroken extends KnotlessError {}

function opened(sealer: RefSealer, key: string, value: Record<string, unknown>): RefRecord {
  try {
    return sealer.open(key, value);
  } catch (err) {
    if (!isKnotlessError(err)) throw err;
    throw new SealBroken(err.code, err.message, { cause: err });
  }
}

/** True when a record read back is the one we wrote (its `updatedAt` makes it ours, not a twin). */
function sameRecord(a: RefRecord, b: RefRecord): boolean {
  return (
    a.ref === b.ref &&
    a.target === b.target &&
    a.symref === b.symref &&
    a.peeled === b.peeled &&
    a.updatedAt === b.updatedAt &&
    a.packs.length === b.packs.length &&
    a.packs.every((p, i) => p.id === b.packs[i]?.id)
  );
}

/**
 * A write's failure as the user should read it. `what` names no single ref, so that a push whose
 * refs all fail for one reason prints one sentence (git's own lines say which refs failed).
 */
function writeFailure(err: unknown, what: string, ref?: string): unknown {
  if (!(err instanceof XrpcError)) return err;
  switch (pdsRefusal(err)) {
    case 'swap-conflict':
      return new SwapConflict(err.message);
    case 'key-refused':
      return new KeyRefused(err.message);
    case 'blob-missing':
      return new BlobMissing(err.message);
    case 'too-large':
      return new KnotlessError(
        'too-large',
        `The PDS refused ${safeText(ref ?? what)} as too large (${safeText(err.message)}).`,
        { cause: err },
      );
    default:
      return generalFailure(err, what);
  }
}

/** Refs by name, and apart those that two or more records claim (no record of such a ref is used). */
export function refsByName(refs: RemoteRef[]): {
  byName: Map<string, RemoteRef>;
  contested: Map<string, RemoteRef[]>;
} {
  const claims = new Map<string, RemoteRef[]>();
  for (const r of refs) claims.set(r.record.ref, [...(claims.get(r.record.ref) ?? []), r]);
  const byName = new Map<string, RemoteRef>();
  const contested = new Map<string, RemoteRef[]>();
  for (const [name, list] of claims) {
    if (list.length === 1) byName.set(name, list[0]!);
    else contested.set(name, list);
  }
  return { byName, contested };
}

/** The one sentence for a ref that several records claim. */
export function contestedSentence(ref: string, claims: RemoteRef[]): string {
  const keys = claims.map((c) => safeText(c.key, 100)).join(', ');
  return `The remote holds ${claims.length} records for the ref ${safeText(ref)} (${keys}); knotless will not choose one, so the ref was ignored: delete it (git push <remote> :${safeText(ref)}) and push it again`;
}
