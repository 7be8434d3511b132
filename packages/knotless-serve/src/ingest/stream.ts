import type { IdResolver } from '@atproto/identity';
import type { Event } from '@atproto/sync';
import { decodeBlock, readCar } from 'knotless-core/records/proof';
import { nowMs, trace, tracing } from '../trace.ts';

const METHOD = 'com.atproto.sync.subscribeRepos';
/** How often the position is saved when events go by that change nothing in the index. */
const SAVE_EVERY_MS = 1000;
/** The longest the stream keeps the event loop to itself while frames are waiting. */
const TURN_MS = 10;

/** What a followed stream is handed. */
export interface StreamOptions {
  /** The ws(s):// base of a relay or PDS. */
  service: string;
  idResolver: IdResolver;
  /** The collections whose records are wanted; every other commit is passed over unread. */
  wanted(collection: string): boolean;
  /** The saved position, read at each (re)connection until the stream has one of its own. */
  getCursor(): Promise<number | undefined>;
  saveCursor(seq: number): Promise<void>;
  /** Forgets the saved position (the service refused it). */
  dropCursor(): Promise<void>;
  /** A record, identity, account or sync event, in @atproto/sync's shapes. */
  handle(evt: Event): Promise<void>;
  /**
   * The stream lost events: the service refused the cursor (`FutureCursor`, the position is then
   * forgotten) or said it no longer holds it (`OutdatedCursor`). What was missed must be read again.
   */
  gap(reason: string): void;
  /** A commit of this account at `rev`, signed by its key, was verified and its writes indexed. */
  verified?(did: string, rev: string): Promise<void>;
  /** An event of this account could not be indexed: its records must be read again. */
  recheck(did: string): void;
  log(line: string): void;
}

export interface Stream {
  /** Sequence number of the last event handled, when there is one. */
  readonly seq: number | undefined;
  stop(): Promise<void>;
}

/**
 * Follows a relay's (or a PDS's) com.atproto.sync.subscribeRepos: @atproto/ws-client connects and
 * reconnects, @atproto/xrpc-server's `Frame` reads the frames. The stream is the whole network: a
 * commit is first judged by its bytes (`passOver`), then by its operations' paths, and only one
 * touching a wanted collection is
 * verified (@atproto/sync's `parseCommitAuthenticated`: the account's key, the CAR's proofs), so
 * that the DID of an account without knotless records is never resolved. Identity and account
 * events are passed on without a resolution: the handler decides whether the account matters.
 * Events are handled one at a time, in order; the position is saved at least every second.
 */
export async function followStream(opts: StreamOptions): Promise<Stream> {
  const [{ websocket }, { Frame }, sync] = await Promise.all([
    import('@atproto/ws-client'),
    import('@atproto/xrpc-server'),
    import('@atproto/sync'),
  ]);
  const ac = new AbortController();
  let seq: number | undefined;
  /** The last frame passed over unread, newer than `seq`: its number is read only when needed. */
  let skipped: Uint8Array | undefined;
  let saved: number | undefined;
  /** The position: the last frame handled, or passed over. */
  const position = (): number | undefined => {
    if (skipped !== undefined) {
      const body = Frame.fromBytes(skipped).body as { seq?: unknown };
      if (typeof body.seq === 'number') seq = body.seq;
      skipped = undefined;
    }
    return seq;
  };
  let lastSave = Date.now();
  let handling = false;

  const save = async (): Promise<void> => {
    lastSave = Date.now();
    const at = position();
    if (at === undefined || at === saved) return;
    await opts.saveCursor(at);
    saved = at;
  };
  const failed = (err: unknown): void => opts.log(`${opts.service}: saving the position: ${String(err)}`);
  // While the stream is quiet no event runs the save below: this one does, between events only.
  const timer = setInterval(() => {
    if (!handling && Date.now() - lastSave >= SAVE_EVERY_MS) save().catch(failed);
  }, SAVE_EVERY_MS);
  timer.unref();

  const one = async (v: Record<string, unknown>): Promise<void> => {
    const type = typeof v['$type'] === 'string' ? v['$type'].slice(METHOD.length) : '';
    const did = typeof v['repo'] === 'string' ? v['repo'] : typeof v['did'] === 'string' ? v['did'] : '';
    try {
      switch (type) {
        case '#commit': {
          const ops = v['ops'];
          if (!Array.isArray(ops) || !ops.some((op) => wantedPath(op, (c) => opts.wanted(c)))) break;
          const commit = v as unknown as Parameters<typeof sync.parseCommitAuthenticated>[1];
          const events = await sync.parseCommitAuthenticated(opts.idResolver, commit, (c) => opts.wanted(c));
          // The library leaves out, without a word, an operation its commit does not prove (a record
          // changed, added or removed on the way): the commit is then refused whole, and its account
          // read again, rather than indexed in part.
          const wantedOps = ops.filter((op) => wantedPath(op, (c) => opts.wanted(c))).length;
          if (events.length !== wantedOps)
            throw new Error(
              `${wantedOps - events.length} of its ${wantedOps} knotless operations are not proved by its signed commit`,
            );
          // The revision each write is indexed at is the event's word: it must be the signed commit's.
          const rev = signedRev(commit.blocks, commit.commit.toString(), did);
          if (rev !== commit.rev) throw new Error("the event's revision is not its signed commit's");
          for (const evt of events) await opts.handle(evt);
          await opts.verified?.(did, rev);
          break;
        }
        case '#sync': {
          const evt = await sync.parseSync(v as unknown as Parameters<typeof sync.parseSync>[0]);
          if (evt !== null) await opts.handle(evt);
          break;
        }
        case '#identity':
          if (typeof v['did'] === 'string' && typeof v['seq'] === 'number')
            await opts.handle({
              event: 'identity',
              seq: v['seq'],
              time: String(v['time']),
              did: v['did'] as `did:${string}:${string}`,
              ...(typeof v['handle'] === 'string' ? { handle: v['handle'] } : {}),
            });
          break;
        case '#account': {
          const evt = sync.parseAccount(v as unknown as Parameters<typeof sync.parseAccount>[0]);
          if (evt !== undefined) await opts.handle(evt);
          break;
        }
        case '#info':
          opts.log(
            `${opts.service}: ${String(v['name'])}: ${typeof v['message'] === 'string' ? v['message'] : ''}`,
          );
          if (v['name'] === 'OutdatedCursor') opts.gap('OutdatedCursor');
          break;
      }
    } catch (err) {
      // A commit that fails verification, or an index that failed: the event is not lost silently,
      // its account is read again whole.
      opts.log(`${opts.service}: event ${String(v['seq'])} of ${did}: ${String(err)}`);
      if (did.startsWith('did:')) opts.recheck(did);
    }
    if (typeof v['seq'] === 'number') seq = v['seq'];
  };

  /** A frame as received: passed over unread when it cannot matter, else decoded and handled. */
  const frame = async (bytes: Uint8Array): Promise<void> => {
    if (passOver(bytes)) {
      skipped = bytes;
      return;
    }
    const at = tracing() ? nowMs() : 0;
    const f = Frame.fromBytes(bytes);
    if (f.isError()) throw Object.assign(new Error(`${f.code}: ${f.message ?? ''}`), { error: f.code });
    const body = f.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
    skipped = undefined;
    const key = (body as { seq?: unknown }).seq;
    if (typeof key === 'number') trace('frame', key, at);
    await one({ ...(body as Record<string, unknown>), $type: `${METHOD}${f.header.t ?? ''}` });
    if (typeof key === 'number') trace('indexed', key);
  };

  const run = (async () => {
    while (!ac.signal.aborted) {
      // @atproto/ws-client, as @atproto/xrpc-server's Subscription uses it, but with the frames'
      // bytes in hand: most of the network's frames are passed over before any decoding.
      const ws = websocket(
        async () => {
          const cursor = position() ?? (await opts.getCursor());
          return `${opts.service}/xrpc/${METHOD}${cursor === undefined ? '' : `?cursor=${cursor}`}`;
        },
        { dataMode: 'binary', maxReconnectSeconds: 30, heartbeat: {}, signal: ac.signal },
      );
      try {
        let turn = performance.now();
        for await (const bytes of ws) {
          handling = true;
          await frame(bytes);
          handling = false;
          if (Date.now() - lastSave >= SAVE_EVERY_MS) await save().catch(failed);
          // Frames already received are handed over without a return to the event loop: while a
          // backlog drains, pages, mirror syncs and git's exits would wait for all of it.
          if (performance.now() - turn >= TURN_MS) {
            await new Promise((r) => setImmediate(r));
            turn = performance.now();
          }
        }
      } catch (err) {
        handling = false;
        if (ac.signal.aborted) break;
        const code = (err as { error?: unknown }).error;
        opts.log(`${opts.service}: ${String(err)}`);
        if (code === 'FutureCursor') {
          // The service does not know our position (a relay started afresh): take its stream from
          // now, and read again what may have been missed.
          seq = undefined;
          skipped = undefined;
          saved = undefined;
          await opts.dropCursor().catch(failed);
          opts.gap('FutureCursor');
        }
        // A reconnection backoff: the client already retried its connection on its own.
        await new Promise((r) => setTimeout(r, 1000).unref());
      }
    }
  })();
  opts.log(`following ${opts.service}`);
  return {
    get seq() {
      return position();
    },
    async stop() {
      ac.abort();
      clearInterval(timer);
      await run;
      await save().catch(failed);
    },
  };
}

/**
 * The revision of the commit a #commit event's CAR holds at its root (the one whose signature
 * @atproto/sync checked), when that root is the commit the event names and is the account's; else
 * undefined.
 */
function signedRev(blocks: Uint8Array, commit: string, did: string): string | undefined {
  const car = readCar(blocks);
  if (car.root.toString() !== commit) return undefined;
  const block = car.blocks.get(commit);
  const c = block === undefined ? null : (decodeBlock(block) as { did?: unknown; rev?: unknown } | null);
  return c !== null && c.did === did && typeof c.rev === 'string' ? c.rev : undefined;
}

/** Whether a commit operation's path (`collection/rkey`) is in a wanted collection. */
function wantedPath(op: unknown, wanted: (collection: string) => boolean): boolean {
  const path = (op as { path?: unknown } | null)?.path;
  if (typeof path !== 'string') return false;
  const slash = path.indexOf('/');
  return slash > 0 && wanted(path.slice(0, slash));
}

const COMMIT = Buffer.from('#commit');
const KNOTLESS = Buffer.from('dev.knotless.');

/**
 * Whether a frame cannot matter: a commit (its header, the first CBOR item, names `#commit`) whose
 * bytes nowhere hold `dev.knotless.`, so that no operation's path can be in a knotless collection.
 * Most of the network's frames are such commits; looking costs a byte search, not a decoding.
 * A frame that merely mentions the prefix (a post quoting it) is decoded and then found to hold
 * nothing of ours.
 */
export function passOver(bytes: Uint8Array): boolean {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const head = b.subarray(0, 24).indexOf(COMMIT);
  return head >= 0 && b.indexOf(KNOTLESS, head) < 0;
}
