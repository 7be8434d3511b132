import type { ForgeServices } from './services.ts';
import { KnotlessError, isKnotlessError } from '../errors.ts';
import type { Identity } from '../identity/resolver.ts';
import { MAX_PAGE_BYTES, listRecords, rkeyOf } from '../records/list-records.ts';
import { RECORD_ANSWER_BYTES } from '../records/ref-record.ts';
import { safeText } from '../text/terminal.ts';
import { XrpcError, generalFailure, type Authorizer } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { atUri } from './records.ts';
import { newTid } from '../tid.ts';

/** A record as read: where it is, its CID (for compare-and-swap) and its parsed value. */
export interface Stored<T> {
  uri: string;
  did: string;
  rkey: string;
  cid: string;
  value: T;
}

/** Reads and writes forge records (pulls, issues, statuses, comments) in their authors' PDSes. */
export class ForgeStore {
  readonly #ctx: ForgeServices;
  readonly #warn: (message: string) => void;

  constructor(ctx: ForgeServices, warn: (message: string) => void) {
    this.#ctx = ctx;
    this.#warn = warn;
  }

  /**
   * Creates a record with a fresh TID key (or `rkey`) in the session's account; returns where it is. Written as
   * a putRecord with `swapRecord: null` (create only if absent), which is safe to retry: a retry
   * after a lost answer meets its own first copy, which is read back and taken, never written twice.
   */
  async create(
    auth: Authorizer & { session: { did: string; pds: string } },
    collection: string,
    record: Record<string, unknown>,
    rkey = newTid(),
  ): Promise<{ uri: string; cid: string; rkey: string }> {
    const client = this.#ctx.client(auth.session.pds, auth);
    try {
      const res = await client.procedure<{ uri: string; cid: string }>('com.atproto.repo.putRecord', {
        repo: auth.session.did,
        collection,
        rkey,
        record,
        swapRecord: null,
      });
      return { uri: res.uri, cid: res.cid, rkey };
    } catch (err) {
      if (err instanceof XrpcError && err.attempts > 1 && pdsRefusal(err) === 'swap-conflict') {
        const mine = await this.getRaw(auth.session, collection, rkey);
        const same = (mine?.value as { createdAt?: unknown } | undefined)?.createdAt === record['createdAt'];
        if (mine !== undefined && same) return { uri: mine.uri, cid: mine.cid, rkey };
      }
      throw generalFailure(err, `writing a ${collection} record`);
    }
  }

  /** Replaces a record of the session's account if its CID is still `swap`. */
  async put(
    auth: Authorizer & { session: { did: string; pds: string } },
    collection: string,
    rkey: string,
    record: Record<string, unknown>,
    swap: string,
  ): Promise<{ cid: string }> {
    try {
      return await this.#ctx
        .client(auth.session.pds, auth)
        .procedure<{ cid: string }>('com.atproto.repo.putRecord', {
          repo: auth.session.did,
          collection,
          rkey,
          record,
          swapRecord: swap,
        });
    } catch (err) {
      if (err instanceof XrpcError && pdsRefusal(err) === 'swap-conflict')
        throw new KnotlessError(
          'remote-changed',
          `The ${collection} record ${safeText(rkey)} changed while it was updated; run the command again.`,
          { cause: err },
        );
      throw generalFailure(err, `writing a ${collection} record`);
    }
  }

  /** Deletes a record of the session's account (nothing when it is already gone). */
  async delete(
    auth: Authorizer & { session: { did: string; pds: string } },
    collection: string,
    rkey: string,
  ): Promise<void> {
    try {
      await this.#ctx
        .client(auth.session.pds, auth)
        .procedure('com.atproto.repo.deleteRecord', { repo: auth.session.did, collection, rkey });
    } catch (err) {
      throw generalFailure(err, `deleting a ${collection} record`);
    }
  }

  /** One record, unparsed, or undefined when there is none. */
  async getRaw(
    owner: Pick<Identity, 'did' | 'pds'>,
    collection: string,
    rkey: string,
  ): Promise<{ uri: string; cid: string; value: unknown } | undefined> {
    try {
      const res = await this.#ctx
        .client(owner.pds)
        .query<{ cid: string; value: unknown }>(
          'com.atproto.repo.getRecord',
          { repo: owner.did, collection, rkey },
          RECORD_ANSWER_BYTES,
        );
      return { uri: atUri(owner.did, collection, rkey), cid: res.cid, value: res.value };
    } catch (err) {
      if (err instanceof XrpcError && pdsRefusal(err) === 'record-missing') return undefined;
      throw generalFailure(err, `reading a ${collection} record`);
    }
  }

  /** One record parsed by `parse`, or undefined when there is none or it is invalid (said on stderr). */
  async get<T>(
    owner: Pick<Identity, 'did' | 'pds'>,
    collection: string,
    rkey: string,
    parse: (v: unknown) => Promise<T>,
  ): Promise<Stored<T> | undefined> {
    const raw = await this.getRaw(owner, collection, rkey);
    if (raw === undefined) return undefined;
    const value = await this.#parsed(raw.uri, raw.value, parse);
    return value === undefined ? undefined : { ...raw, did: owner.did, rkey, value };
  }

  /** Every valid record of a collection in one account; invalid ones are skipped with a warning. */
  async list<T>(
    owner: Pick<Identity, 'did' | 'pds'>,
    collection: string,
    parse: (v: unknown) => Promise<T>,
  ): Promise<Stored<T>[]> {
    const out: Stored<T>[] = [];
    try {
      for await (const r of listRecords(this.#ctx.client(owner.pds), owner.did, collection)) {
        if (typeof r.cid !== 'string') continue;
        const value = await this.#parsed(r.uri, r.value, parse);
        if (value !== undefined)
          out.push({ uri: r.uri, did: owner.did, rkey: rkeyOf(r.uri), cid: r.cid, value });
      }
    } catch (err) {
      throw generalFailure(err, `listing ${collection} records`);
    }
    return out;
  }

  /**
   * The newest valid records of a collection written after `since` (an ISO time), in one request
   * ({@link page}), read until a record older than `since`. `since` in the answer is how far back
   * the reading is complete: `since` itself, or the oldest record read when the page was full
   * before reaching it.
   */
  async recent<T extends { createdAt: string }>(
    owner: Pick<Identity, 'did' | 'pds'>,
    collection: string,
    parse: (v: unknown) => Promise<T>,
    limit: number,
    since: string,
  ): Promise<{ records: Stored<T>[]; since: string }> {
    const got = await this.page(owner, collection, parse, limit);
    const records: Stored<T>[] = [];
    // Keys and times may disagree (a hand-written record): the oldest time read bounds what was seen.
    let complete = new Date(8.64e15).toISOString();
    for (const r of got.records) {
      if (Date.parse(r.value.createdAt) <= Date.parse(since)) return { records, since };
      records.push(r);
      if (Date.parse(r.value.createdAt) < Date.parse(complete)) complete = r.value.createdAt;
    }
    return { records, since: got.complete ? since : complete };
  }

  /**
   * The valid records among the `limit` with the greatest keys (one listRecords page, the PDS's own
   * order: newest TID first), or the next ones after `cursor` (the answer's `cursor`, when the PDS
   * has more), whether that was all the account has, and how many it listed. Any record with a
   * greater key than one read was read too.
   */
  async page<T>(
    owner: Pick<Identity, 'did' | 'pds'>,
    collection: string,
    parse: (v: unknown) => Promise<T>,
    limit: number,
    cursor?: string,
  ): Promise<{ records: Stored<T>[]; complete: boolean; cursor?: string; read: number }> {
    let page: { records?: unknown; cursor?: unknown };
    try {
      page = await this.#ctx
        .client(owner.pds)
        .query<{ records?: unknown; cursor?: unknown }>(
          'com.atproto.repo.listRecords',
          { repo: owner.did, collection, limit, ...(cursor === undefined ? {} : { cursor }) },
          Math.min(MAX_PAGE_BYTES, limit * RECORD_ANSWER_BYTES),
        );
    } catch (err) {
      throw generalFailure(err, `listing ${collection} records`);
    }
    const listed = page.records;
    if (!Array.isArray(listed) || listed.length > limit)
      throw new KnotlessError(
        'corrupt-remote',
        `The PDS answered a listing of ${collection} with something that is not one; check the account's PDS.`,
      );
    const records: Stored<T>[] = [];
    for (const r of listed as { uri?: unknown; cid?: unknown; value?: unknown }[]) {
      if (typeof r?.uri !== 'string' || typeof r.cid !== 'string') continue;
      // A record is taken as written by this account only where its uri says so.
      if (r.uri !== atUri(owner.did, collection, rkeyOf(r.uri))) continue;
      const value = await this.#parsed(r.uri, r.value, parse);
      if (value === undefined) continue;
      records.push({ uri: r.uri, did: owner.did, rkey: rkeyOf(r.uri), cid: r.cid, value });
    }
    const next = typeof page.cursor === 'string' && page.cursor !== cursor ? page.cursor : undefined;
    return {
      records,
      complete: listed.length < limit,
      ...(next === undefined ? {} : { cursor: next }),
      read: listed.length,
    };
  }

  async #parsed<T>(uri: string, value: unknown, parse: (v: unknown) => Promise<T>): Promise<T | undefined> {
    try {
      return await parse(value);
    } catch (err) {
      if (!isKnotlessError(err, 'corrupt-remote')) throw err;
      this.#warn(`${err.message.replace(/\.$/, '')} (${safeText(uri)})`);
      return undefined;
    }
  }
}
