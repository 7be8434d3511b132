import type { IdResolver } from '@atproto/identity';
import { MAX_RECORD_BYTES, parseRefRecord } from 'knotless-core/records/ref-record';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import {
  REF_COLLECTION,
  REFS_COLLECTION,
  REFS_PART_COLLECTION,
  refKeyPrefix,
} from 'knotless-core/records/collections';
import { safeText } from 'knotless-core/text/terminal';
import type { CheckedOps } from './commit-check.ts';
import { mayConcern } from './frame-filter.ts';

const METHOD = 'com.atproto.sync.subscribeRepos';

/** What the stream does with what it learns. */
export interface StreamSink {
  /** True when the agent keeps a view of one of this account's repositories. */
  follows(did: string): boolean;
  /** Every account the agent keeps a view of. */
  followed(): Iterable<string>;
  /**
   * True when `commit` (a CID) is one of the agent's own group commits of `did`: its writes reached
   * the views from the PDS's answer to that applyWrites already.
   */
  ours(did: string, commit: string): boolean;
  /** One commit's changes to ref records, in order (null: deleted). */
  apply(did: string, changes: Array<{ key: string; ref: RemoteRef | null }>, rev: string): void;
  /**
   * One commit's changes to ref tables and their parts (value null: deleted), awaited before the
   * next event: a table's view may need a part fetched. Throws when the views cannot take them.
   */
  tables(
    did: string,
    changes: Array<{ collection: string; key: string; cid: string | null; value: unknown }>,
    rev: string,
    commit: string,
  ): Promise<void>;
  /** An identity or account event of a followed account: what is cached of its identity is stale. */
  identityChanged(did: string): void;
  /** The views of `did` hold every change up to its commit `commit` (the stream delivers in order). */
  head(did: string, commit: string, rev: string): void;
  /** The stream could not apply something: forget the views of `did`, or of every account (undefined). */
  drop(did: string | undefined, why: string): void;
}

/** Checks one commit event of `did` (commit-check.ts), with the libraries and key already bound. */
type Check = (msg: Record<string, unknown>, did: string) => Promise<CheckedOps>;
type CidLike = { toString(): string };

/**
 * One PDS's event stream (com.atproto.sync.subscribeRepos, live, no cursor), decoded with the
 * atproto libraries: commits are checked against the account's signing key by @atproto/sync and
 * their records turned into JSON by @atproto/lex-json, the form listings have.
 *
 * Why a view built on it can be trusted, from the reference PDS's code: a live subscription without
 * a cursor registers its listener on the sequencer (Outbox.events, `sequencer.on('events')`) before
 * it can yield anything, and the sequencer emits each commit after inserting it, in sequence order.
 * So once a message has arrived on a connection, every commit inserted after that moment reaches
 * us on it, in order: a listing started after the first message misses nothing the stream will not
 * deliver. "Live" is therefore proved by a message, never assumed from a delay. What it cannot prove
 * is that a commit already acknowledged to another machine has been emitted yet (the sequencer polls
 * its table, up to a second apart when idle), so a helper's question is answered only after the
 * stream has delivered the account's latest revision (see {@link waitForRev}), as atproto's dev-env
 * waits for its subscribers' cursors to reach the PDS's last sequence number.
 *
 * The whole argument: revisions are TIDs that only grow within an account, and the stream delivers an
 * account's commits in order. A view lists after its stream was live and takes every commit delivered
 * since (or is dropped), so once the stream has delivered revision R, or R is the revision read just
 * before the listing, the view is the repository at R. R is read from the PDS after git's helper
 * asked, so the answer is as current as a listing made then. A cut connection, a reconnect, an error
 * or any message we cannot follow ends "live" and drops every view of the PDS; events missed in a gap
 * cannot be told apart from none, so nothing is trusted across one.
 */
export class PdsStream {
  readonly #pds: string;
  readonly #sink: StreamSink;
  readonly #log: (line: string) => void;
  readonly #abort = new AbortController();
  #live = false;
  #dead = false;
  #connections = 0;
  #liveWaiters: Array<(live: boolean) => void> = [];
  /** Per followed account: the revision of the last commit the stream delivered and we applied. */
  readonly #seen = new Map<string, string>();
  readonly #revWaiters = new Set<() => void>();

  constructor(pds: string, sink: StreamSink, log: (line: string) => void) {
    this.#pds = pds;
    this.#sink = sink;
    this.#log = log;
  }

  /** True while the subscription is demonstrably live (a message arrived on this connection). */
  get live(): boolean {
    return this.#live && !this.#dead;
  }

  get dead(): boolean {
    return this.#dead;
  }

  /** Settles true once the stream is live, false if it dies first. */
  whenLive(): Promise<boolean> {
    if (this.#dead) return Promise.resolve(false);
    if (this.#live) return Promise.resolve(true);
    return new Promise((resolve) => this.#liveWaiters.push(resolve));
  }

  /** The revision of the last commit of `did` the stream delivered, or ''. */
  seen(did: string): string {
    return this.#seen.get(did) ?? '';
  }

  /**
   * Waits until the stream has delivered the commit of `did` at revision `rev` (revisions are TIDs,
   * ordered as strings), at most `ms`. False when it did not, or the stream stopped being live.
   */
  waitForRev(did: string, rev: string, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (!this.live) finish(false);
        else if (this.seen(did) >= rev) finish(true);
      };
      // A bound on how long a helper waits for a condition, not a stand-in for it: past it, the
      // helper lists for itself.
      const timer = setTimeout(() => finish(false), ms);
      const finish = (ok: boolean): void => {
        clearTimeout(timer);
        this.#revWaiters.delete(check);
        resolve(ok);
      };
      this.#revWaiters.add(check);
      check();
    });
  }

  /**
   * Subscribes; runs until the stream fails for good or {@link stop}. The connection is
   * @atproto/ws-client's, as @atproto/xrpc-server's Subscription makes it (same heartbeat and
   * reconnects), but frames are read here: a PDS's stream carries every account on it, and a frame
   * that cannot concern a followed account is dropped before its body is decoded ({@link #concerns}).
   */
  async run(idResolver: IdResolver): Promise<void> {
    const [libs, { checkCommitEvent }, { decodeBlock, jsonForm }] = await Promise.all([
      import('./stream-libs.ts'),
      import('./commit-check.ts'),
      import('knotless-core/records/proof'),
    ]);
    const { websocket, ensureChunkIsMessage } = libs;
    const check: Check = (msg, did) =>
      checkCommitEvent(msg, did, (refresh) => idResolver.did.resolveAtprotoKey(did, refresh), libs);
    const toJson = (block: Uint8Array): unknown => jsonForm(decodeBlock(block));
    const ws = websocket(
      // Asked before every connection: a second one means the first was lost, with whatever it
      // had not yet delivered, so every view this stream kept is dropped.
      () => {
        if (++this.#connections > 1) this.#lost('the event stream reconnected');
        return `${this.#pds.replace(/^http/, 'ws')}/xrpc/${METHOD}`;
      },
      {
        dataMode: 'binary',
        heartbeat: {},
        signal: this.#abort.signal,
        // Told when a connection was lost, before the backoff: stop answering from views at once.
        onReconnect: (err) => {
          this.#log(`event stream of ${safeText(this.#pds)}: ${safeText(String(err))}`);
          this.#lost('the event stream was cut');
        },
      },
    );
    try {
      for await (const chunk of ws) {
        this.#markLive();
        this.frames++;
        if (!this.#concerns(chunk)) continue;
        this.decoded++;
        const message = ensureChunkIsMessage(chunk);
        const t = message.header.t;
        const body = message.body;
        // Nothing is skipped unseen: a message we cannot read still reaches #handle, which drops views.
        const msg: Record<string, unknown> =
          typeof body === 'object' && body !== null && !Array.isArray(body)
            ? {
                ...(body as Record<string, unknown>),
                ...(t === undefined ? {} : { $type: t.startsWith('#') ? METHOD + t : t }),
              }
            : {};
        await this.#handle(msg, check, toJson);
      }
      if (!this.#abort.signal.aborted) this.#die('the event stream ended');
    } catch (err) {
      if (!this.#abort.signal.aborted) this.#die(`the event stream failed: ${safeText(String(err))}`);
    }
    this.#dead = true;
  }

  /** Frames read, and frames decoded (the rest could not concern a followed account): for the bench. */
  frames = 0;
  decoded = 0;
  /** Commits of followed accounts checked, and those taken as our own group commits wrote them. */
  checked = 0;
  ours = 0;

  #concerns(chunk: Uint8Array): boolean {
    return mayConcern(chunk, this.#sink.followed(), this.#needles);
  }

  readonly #needles = new Map<string, Buffer>();

  stop(): void {
    this.#dead = true;
    this.#abort.abort();
    this.#wake();
  }

  async #handle(
    msg: Record<string, unknown>,
    check: Check,
    toJson: (block: Uint8Array) => unknown,
  ): Promise<void> {
    const type = typeof msg['$type'] === 'string' ? msg['$type'].replace(METHOD, '') : '';
    const did = typeof msg['repo'] === 'string' ? msg['repo'] : msg['did'];
    const rev = typeof msg['rev'] === 'string' ? msg['rev'] : '';
    if (type === '#commit' && typeof did === 'string') {
      if (!this.#sink.follows(did)) return;
      // Our own group commit: the views took its writes from the PDS's answer to our applyWrites,
      // which they trust as they trust a listing, so checking its signature and proofs again (most
      // of the agent's CPU per push: secp256k1 in JavaScript) would tell them nothing new. Any other
      // commit, and ours when the stream delivers it before the answer arrives, is checked.
      // A CID decoded from CBOR (multiformats' CID: its text is the base32 form the PDS answers with).
      const commit = msg['commit'];
      const cid = typeof commit === 'object' && commit !== null ? (commit as CidLike).toString() : '';
      if (cid !== '' && this.#sink.ours(did, cid)) {
        this.ours++;
        this.#sink.head(did, cid, rev);
        this.#see(did, rev);
        return;
      }
      this.checked++;
      try {
        // Every commit of a followed account is checked, with or without ref changes: one whose ops
        // were stripped of a ref change would otherwise move the view's commit on without it.
        const ops = await check(msg, did);
        // Ref tables and their parts: taken from the commit's own (checked) blocks.
        const tables = ops
          .filter((o) => isTable(o.path.split('/')[0]!))
          .map((o) => ({
            collection: o.path.split('/')[0]!,
            key: o.path.slice(o.path.indexOf('/') + 1),
            cid: o.cid,
            value: o.block === null ? null : toJson(o.block),
          }));
        if (tables.length > 0) await this.#sink.tables(did, tables, rev, cid);
        const changes = ops
          .filter((o) => isRef(o.path.split('/')[0]!))
          .map((o) => {
            const key = o.path.slice(o.path.indexOf('/') + 1);
            return {
              key,
              ref: o.block === null ? null : { key, cid: o.cid!, record: asListed(key, toJson(o.block)) },
            };
          });
        if (changes.length > 0) this.#sink.apply(did, changes, rev);
        if (cid !== '') this.#sink.head(did, cid, rev);
      } catch (err) {
        this.#sink.drop(did, `an event could not be applied (${safeText(errorText(err))})`);
      }
      this.#see(did, rev);
    } else if ((type === '#sync' || type === '#account' || type === '#identity') && typeof did === 'string') {
      // A reset repository, a changed account status or identity: nothing to apply, everything to re-list.
      if (this.#sink.follows(did)) {
        if (type !== '#sync') this.#sink.identityChanged(did);
        this.#sink.drop(did, `the event stream reported a ${type.slice(1)} event`);
      }
      if (rev !== '') this.#see(did, rev);
    } else {
      const name = typeof msg['name'] === 'string' ? `: ${safeText(msg['name'], 60)}` : '';
      this.#sink.drop(
        undefined,
        `the event stream sent ${type === '' ? 'an unreadable message' : type}${name}`,
      );
    }
  }

  #see(did: string, rev: string): void {
    if (rev !== '' && this.#sink.follows(did) && rev > this.seen(did)) this.#seen.set(did, rev);
    this.#wake();
  }

  #markLive(): void {
    if (this.#live) return;
    this.#live = true;
    for (const w of this.#liveWaiters.splice(0)) w(true);
  }

  #lost(why: string): void {
    this.#live = false;
    this.#seen.clear();
    this.#sink.drop(undefined, why);
    this.#wake();
  }

  #die(why: string): void {
    this.#dead = true;
    this.#lost(why);
    for (const w of this.#liveWaiters.splice(0)) w(false);
  }

  #wake(): void {
    for (const check of [...this.#revWaiters]) check();
  }
}

/**
 * A record from the stream, held to what a listing keeps (RemoteRepo#parse): one a listing would
 * skip, as oversized or as another repository's, cannot be applied the same way, so it throws.
 */
function asListed(key: string, json: unknown): RemoteRef['record'] {
  const size = JSON.stringify(json)?.length ?? 0;
  if (size > MAX_RECORD_BYTES) throw new Error(`a ref record of ${size} bytes`);
  const record = parseRefRecord(json);
  if (!key.startsWith(refKeyPrefix(record.repo))) throw new Error('a ref record naming another repository');
  return record;
}

function isTable(collection: string): boolean {
  return collection === REFS_COLLECTION || collection === REFS_PART_COLLECTION;
}

function isRef(collection: string): boolean {
  return collection === REF_COLLECTION;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
