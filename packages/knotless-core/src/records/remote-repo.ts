import { isKnotlessError } from '../errors.ts';
import type { Identity } from '../identity/resolver.ts';
import { REF_COLLECTION, REPO_COLLECTION, refKeyPrefix } from './collections.ts';
import { listKeyRange } from './list-range.ts';
import { rkeyOf, type ListedRecord } from './list-records.ts';
import { safeText } from '../text/terminal.ts';
import { XrpcError, generalFailure, type Authorizer, type XrpcClient } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import type { Transport } from '../xrpc/transport.ts';
import { refKey } from './ref-key.ts';
import { isSealed, newestEpoch, type PrivacyOpener, type RefSealer } from './sealer.ts';
import { RECORD_ANSWER_BYTES, writeRefRecord, type RefRecord } from './ref-record.ts';
import { contestedSentence, parseRemoteRef, refsByName, type RemoteRef } from './remote-ref.ts';
import { SwapConflict, sameRecord, writeFailure, type RefWrite } from './ref-writes.ts';
import { unverified } from './verified-read.ts';

// Split out of this file, still imported from here by most callers.
export { contestedSentence, refsByName, type RemoteRef } from './remote-ref.ts';
export { BlobMissing, KeyRefused, SwapConflict, type RefWrite } from './ref-writes.ts';

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
  /**
   * What a verified read of the repository's ref table goes through (records/read-refs.ts): the
   * transport, the PLC directory the account's DID document is read from, and the endpoint the
   * reads go to. Without it (the appview, a test) the table is not read.
   */
  verify?: TableVerifier;
  /**
   * The same repository as another account holds it: a maintainer's table of it is in the
   * maintainer's own account (format.md, "Teams"). Resolves the DID (its PDS and handle); without
   * it (the appview, a test) no maintainer's table is read.
   */
  member?: (did: string) => Promise<RemoteRepo>;
}

/** What a verified read needs besides the owner: see {@link RepoClients.verify}. */
export interface TableVerifier {
  transport: Transport;
  plcUrl: string;
  /**
   * The endpoint reads go to: KNOTLESS_SERVICE when set, else `named` (the PDS the DID document just
   * read for the account's key names), else the owner's PDS as this machine last knew it. An account
   * that moved is read where it is now, not where the cache says it was.
   */
  service(named: string | undefined): string;
  /**
   * A client of `service`, with the retries and rate-limit waits of the command's other reads, that
   * verified reads go through; absent, they go once over `transport` (records/verified-read.ts).
   */
  client?(service: string): XrpcClient;
  /**
   * The account's did:plc document as the resolution of the owner read it, handed over once
   * (IdentityResolver.documentRead); undefined when there is none to reuse and it is read afresh.
   */
  document?(): Promise<unknown> | undefined;
  /**
   * Set when verification is turned off (KNOTLESS_VERIFY=0): proofs are read but not checked, and
   * this is called at each read that would have checked one, to say so.
   */
  unchecked?: () => void;
  /**
   * Where the newest verified commit of each account is kept (records/newest-rev.ts), so that an
   * older one is refused; undefined keeps nothing.
   */
  revs?: string;
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
  #opener: PrivacyOpener | undefined;
  /** A private repository's sealer; null once known public; undefined while unknown. */
  #sealer: RefSealer | null | undefined;
  /**
   * Where the last read found the refs: `table` for a `dev.knotless.refs` record, `records` for
   * `dev.knotless.ref` records; undefined before a read (records/read-refs.ts sets it).
   */
  layout: 'table' | 'records' | undefined;

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

  /**
   * Opens the repository again when what was read names a key epoch its sealer lacks (the owner
   * rotated the key since this machine last read the ring): the ring is read afresh.
   */
  async reopen(epoch: number): Promise<void> {
    if (this.#sealer === null || this.#sealer?.knows(epoch) === true) return;
    this.#sealer = (await this.#opener?.('sealed', epoch)) ?? null;
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

  /** Reports something a reader skipped or ignored, as this repository's other warnings are. */
  warn(message: string): void {
    this.#warn(message);
  }

  /**
   * The repository as the account `did` holds it (a maintainer's table of it), read through the
   * same configuration; undefined when this context reads no maintainers.
   */
  member(did: string): Promise<RemoteRepo> | undefined {
    return this.#clients.member?.(did)?.then((m) => {
      // A maintainer's records of the repository are sealed (or not) as the repository is: its
      // privacy, and the key ring that opens it, are the owner's, never the maintainer's account's.
      m.#opener = this.#opener;
      m.#sealer = this.#sealer;
      return m;
    });
  }

  /** What a verified read goes through, when this context verifies. */
  get verifier(): TableVerifier | undefined {
    return this.#clients.verify;
  }

  /**
   * Every valid ref record of the repository: one request per 100 refs, past the first page read
   * from both ends at once (list-range.ts). Two records that claim one
   * ref (an encoded and a hashed key) are both returned, and warned of once; {@link refsByName}
   * leaves such a ref out, so that nothing ever picks one of them.
   */
  async listRefs(): Promise<RemoteRef[]> {
    return this.refsFrom(await this.listRefRecords());
  }

  /**
   * The repository's ref records as the PDS lists them, unparsed: what a verified reader proves
   * (records/proved-listing.ts) before {@link refsFrom} reads them.
   */
  async listRefRecords(): Promise<ListedRecord[]> {
    try {
      return await listKeyRange(this.#read, this.owner.did, REF_COLLECTION, refKeyPrefix(this.name));
    } catch (err) {
      throw generalFailure(err, `listing the refs of ${this.label}`);
    }
  }

  /** The valid refs of records listed (or proved) under this repository's keys; see {@link listRefs}. */
  async refsFrom(listed: ListedRecord[]): Promise<RemoteRef[]> {
    const out: RemoteRef[] = [];
    try {
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

  /**
   * One ref record by key, or undefined when there is none. When this context verifies, the value
   * must be the block its CID names: a writer swaps on that CID (`swapRecord`), so the write lands
   * only on the record read, and the record read must be what the value says (a PDS or a proxy that
   * answered a ref's older value under its newer CID would have the writer judge a fast-forward
   * on a value the ref no longer has, and overwrite it).
   */
  async getRef(key: string): Promise<RemoteRef | undefined> {
    try {
      const res = await this.#read.query<{ cid: string; value: unknown }>(
        'com.atproto.repo.getRecord',
        { repo: this.owner.did, collection: REF_COLLECTION, rkey: key },
        RECORD_ANSWER_BYTES,
      );
      let value = res.value;
      if (this.verifier !== undefined && this.verifier.unchecked === undefined) {
        const { listedAs } = await import('./proof.ts');
        value = listedAs(res.value, res.cid);
        if (value === undefined)
          throw unverified(
            `${this.owner.handle ?? this.owner.did}/${this.name}`,
            'a ref record read is not the block its CID names',
          );
      }
      await this.prepare(isSealed(value) ? 'sealed' : 'plain', newestEpoch([value]));
      return this.#parse(key, res.cid, value);
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
   * with `swapRecord` alone. The helper reads once before exiting unless it was proven. For a
   * repository on a ref table, `commit` is the CID of the table the view holds: the table's write,
   * swapped on it, proves the listing (ops/push/table.ts), and ref writes never carry it.
   */
  viewProof: { commit: string; state: 'pending' | 'proven' | 'broken' } | undefined;

  /**
   * The commit the write that proved the view made, while it is the only ref write of this push:
   * that write was swapped on the view's commit, so the view with it applied is the account exactly
   * at this commit, and the warm agent can answer the next push from it at once rather than wait
   * for its event stream. Null once any other ref write landed or may have (its commit follows
   * nothing the view knows).
   */
  #provedInto: { commit: string; rev: string } | null | undefined;

  /** See {@link #provedInto}: the commit the view, with this push's one write, is complete at. */
  get viewProvedInto(): { commit: string; rev: string } | undefined {
    return this.viewProof?.state === 'proven' && this.#provedInto !== null ? this.#provedInto : undefined;
  }

  /** `swapCommit` for the next ref write, while the listing's commit waits for its proof. */
  #proofFields(): { swapCommit?: string } {
    return this.viewProof?.state === 'pending' ? { swapCommit: this.viewProof.commit } : {};
  }

  /** The write under way that carries the listing's proof, when others wait for it ({@link #proofFor}). */
  #proving: { done: Promise<void>; settle: () => void } | undefined;

  /**
   * `swapCommit` for the next ref write under `auth`. A write signed request by request (an OAuth
   * session: its DPoP proof signs it as it is sent) reaches the PDS on its own, never folded by the
   * warm agent into one commit with the push's other writes: of several sent at once with the same
   * `swapCommit`, all but the first would be refused and sent again. So they wait for the answer to
   * the one that carries it, and go on without it once it proved the listing or found it broken (one
   * whose write failed otherwise leaves the proof to the next).
   */
  async #proofFor(auth: Authorizer): Promise<{ swapCommit?: string }> {
    if (auth.send === undefined) return this.#proofFields();
    while (this.viewProof?.state === 'pending' && this.#proving !== undefined) await this.#proving.done;
    const proof = this.#proofFields();
    if (proof.swapCommit !== undefined) {
      let resolve = () => {};
      const done = new Promise<void>((r) => (resolve = r));
      this.#proving = {
        done,
        settle: () => {
          this.#proving = undefined;
          resolve();
        },
      };
    }
    return proof;
  }

  /**
   * Settles the listing's proof from a ref write's outcome, and keeps the commit a proving write
   * made (`commit`) while no other write has landed.
   */
  #settleProof(carried: boolean, err?: unknown, commit?: { cid?: unknown; rev?: unknown }): void {
    const made =
      typeof commit?.cid === 'string' && typeof commit.rev === 'string'
        ? { commit: commit.cid, rev: commit.rev }
        : null;
    this.#provedInto = carried && err === undefined && this.#provedInto === undefined ? made : null;
    if (!carried) return;
    if (this.viewProof !== undefined) {
      if (err === undefined) this.viewProof.state = 'proven';
      else if (err instanceof SwapConflict && this.viewProof.state === 'pending')
        this.viewProof.state = 'broken';
    }
    // The writes waiting for this one's answer go on, with the proof as it now stands.
    this.#proving?.settle();
  }

  /** Writes a ref record if its current CID is `swap` (null: if it does not exist). Returns the new CID and revision. */
  async putRef(
    auth: Authorizer,
    key: string,
    record: RefRecord,
    swap: string | null,
  ): Promise<{ cid: string; rev: string }> {
    await this.prepare();
    const proof = await this.#proofFor(auth);
    try {
      const res = await this.writer(auth).procedure<{ cid: string; commit?: { cid?: string; rev?: string } }>(
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
      this.#settleProof(proof.swapCommit !== undefined, undefined, res.commit);
      return { cid: res.cid, rev: res.commit?.rev ?? '' };
    } catch (err) {
      const failure = writeFailure(err, `writing the refs of ${this.label}`, record.ref);
      this.#settleProof(proof.swapCommit !== undefined, failure);
      throw failure;
    }
  }

  /** Deletes a ref record if its current CID is `swap`. */
  async deleteRef(auth: Authorizer, key: string, swap: string): Promise<void> {
    const proof = await this.#proofFor(auth);
    try {
      const res = await this.writer(auth).procedure<{ commit?: { cid?: string; rev?: string } } | undefined>(
        'com.atproto.repo.deleteRecord',
        {
          repo: this.owner.did,
          collection: REF_COLLECTION,
          rkey: key,
          swapRecord: swap,
          ...proof,
        },
      );
      this.#settleProof(proof.swapCommit !== undefined, undefined, res?.commit);
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
    this.#provedInto = null;
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
    this.#provedInto = null;
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
    return parseRemoteRef(
      { name: this.name, sealer: this.#sealer ?? undefined, warn: this.#warn },
      key,
      cid,
      value,
    );
  }
}
