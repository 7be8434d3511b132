import { REF_COLLECTION } from 'knotless-core/records/collections';
import { safeText } from 'knotless-core/text/terminal';
import { pdsRefusal } from 'knotless-core/xrpc/pds-errors';
import type { HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import { RateBudgets } from 'knotless-core/xrpc/rate-limit';
import { AccountState, landedAlone, parseWrite, swapAnswer, type RefOp } from './group-state.ts';

/**
 * How long the first write waits for others before its commit goes. Writes that arrive while a
 * commit is under way wait for it anyway, so under load the batches grow by themselves; this only
 * catches pushes that start together on an idle account.
 */
export const WINDOW_MS = 5;
/**
 * The window while the account's write budget runs low (RateBudgets.low): more pushes fold into each
 * commit, so fewer requests and commits are spent on the same writes. Short beside a push's own time.
 */
export const LOW_BUDGET_WINDOW_MS = 250;
/** The PDS's limit on writes in one applyWrites. */
const MAX_WRITES = 200;
/** How many of our own latest commits `provenSince` walks back through (over every account). */
const OWN_CHAIN = 1024;
/** Commits refused because the account moved, before each write is sent on its own instead. */
const MAX_ROUNDS = 5;

/** Writes of another kind that fold on their own (ref tables: table-group.ts), taken where these are not. */
export interface OtherFolds {
  accept(
    url: URL,
    headers: Record<string, string>,
    body: Buffer,
    deadlineMs?: number,
  ): Promise<HttpResponse> | undefined;
  /** Writes not yet answered, by account. */
  pending(): Record<string, number>;
}

/** One write of a landed commit: its record key, its record (null: deleted) and the record's CID. */
export interface Landed {
  rkey: string;
  record: unknown;
  cid: string | null;
}

/** A ref write a helper forwarded, waiting for the commit that will hold it. */
/** The time limit for a request carrying these writes: the shortest any of their helpers set. */
export function limitOf(writes: Pending[]): { deadlineMs?: number } {
  const limits = writes.flatMap((p) => (p.deadlineMs === undefined ? [] : [p.deadlineMs]));
  return limits.length === 0 ? {} : { deadlineMs: Math.min(...limits) };
}

export interface Pending {
  url: URL;
  headers: Record<string, string>;
  body: Buffer;
  op: RefOp;
  /** The helper's time limit on its request (KNOTLESS_HTTP_TIMEOUT), when it said. */
  deadlineMs: number | undefined;
  resolve(res: HttpResponse): void;
  reject(err: unknown): void;
}

/** One account's queue: at most one commit in flight, the writes that came meanwhile behind it. */
interface Account {
  queue: Pending[];
  /** Writes in the commit under way. */
  sending: number;
  busy: boolean;
  state: AccountState;
  /** The key its write budget is kept under (see budgetKey). */
  key: string;
  /** The budget was low when the last window opened (its change is logged once). */
  low: boolean;
}

/** Where an account's write budget is kept: rate limits are per PDS and per account. */
export function budgetKey(url: URL, did: string): string {
  return `${url.origin} ${did}`;
}

/**
 * Group commit: the ref writes helpers send through the agent (`putRecord` and
 * `deleteRecord` of `dev.knotless.ref`, each with `swapRecord`) that reach it for one account while
 * a commit is under way, or within a few milliseconds of each other, go to the PDS as one
 * `applyWrites` commit. applyWrites takes no per-record swap, so the commit carries `swapCommit`:
 * each write's `swapRecord` is checked against the records as they are at that commit (see
 * AccountState), and a write whose record moved gets the PDS's own `InvalidSwap` answer, alone; the
 * helper then decides again with git's rules, exactly as after a direct write. A commit refused
 * because the account moved is tried again on the new state; a commit the PDS refuses for another
 * reason is split into the writes as they came, each sent on its own, so that each helper hears its
 * own answer. Each write is answered only once the commit that holds it is acknowledged.
 */
export class GroupCommit {
  readonly #transport: Transport;
  readonly #log: (line: string) => void;
  readonly #landed: (did: string, rev: string, writes: Landed[], commit: string) => void;
  readonly #accounts = new Map<string, Account>();
  /** Our own latest commits (their CID → the commit each was swapped on), for `provenSince`. */
  readonly #prev = new Map<string, string>();
  /** Each account's latest commit of ours. */
  readonly #latest = new Map<string, string>();
  readonly #budgets: RateBudgets;
  readonly #tables: OtherFolds | undefined;

  /**
   * `landed` is told of each commit's writes, with the commit's CID, before any helper hears of it
   * (the views take them). `budgets` takes the RateLimit headers of each answer to its writes, and
   * widens the window of an account whose budget runs low. `tables` takes the writes of ref tables
   * (table-group.ts), which fold into one write of the table rather than into one commit.
   */
  constructor(
    transport: Transport,
    log: (line: string) => void,
    landed: (did: string, rev: string, writes: Landed[], commit: string) => void,
    budgets: RateBudgets = new RateBudgets(),
    tables?: OtherFolds,
  ) {
    this.#tables = tables;
    this.#transport = transport;
    this.#log = log;
    this.#landed = landed;
    this.#budgets = budgets;
  }

  /**
   * True when the account's latest revision `rev` is our own last commit, and the agent had seen
   * the account up to where our unbroken run of commits began (`seen`): our own writes, applied as
   * each commit landed, are then all that happened since, and a view is current without waiting
   * for the event stream to deliver our own commits back.
   */
  caughtUp(did: string, rev: string, seen: string): boolean {
    for (const a of this.#accounts.values()) {
      const from = a.state.did === did ? a.state.ownSince(rev) : undefined;
      if (from !== undefined && seen >= from) return true;
    }
    return false;
  }

  /**
   * Takes a forwarded request into a group commit, or returns undefined when it is not a ref write
   * this can group (then it is forwarded as it came). The promise settles as the forward would:
   * with the PDS's answer for this write, or with the failure that left it without one.
   */
  accept(
    url: URL,
    headers: Record<string, string>,
    body: Buffer,
    deadlineMs?: number,
  ): Promise<HttpResponse> | undefined {
    const op = parseWrite(url, headers, body, REF_COLLECTION);
    if (op === undefined) return this.#tables?.accept(url, headers, body, deadlineMs);
    const xrpc = `${url.origin}${url.pathname.replace(/\/[^/]*$/, '')}`;
    const key = `${xrpc} ${op.did}`;
    let acc = this.#accounts.get(key);
    if (acc === undefined) {
      const state = new AccountState(this.#transport, xrpc, op.did, REF_COLLECTION);
      acc = { queue: [], sending: 0, busy: false, state, key: budgetKey(url, op.did), low: false };
      this.#accounts.set(key, acc);
    }
    const account = acc;
    return new Promise<HttpResponse>((resolve, reject) => {
      account.queue.push({ url, headers, body, op, deadlineMs, resolve, reject });
      if (account.busy) return;
      account.busy = true;
      setTimeout(() => void this.#drain(account), this.#window(account));
    });
  }

  /** How long the first write of a new commit waits for others: longer while the budget runs low. */
  #window(acc: Account): number {
    const low = this.#budgets.low(acc.key);
    if (low !== acc.low) {
      acc.low = low;
      const s = this.#budgets.status(acc.key);
      this.#log(
        low && s !== undefined
          ? `group commit: ${safeText(acc.state.did)} has ${s.remaining} of ${s.limit} write points left until ${new Date(s.resetAt).toISOString()}; waiting ${LOW_BUDGET_WINDOW_MS} ms for more pushes per commit`
          : `group commit: ${safeText(acc.state.did)} has write points enough again; waiting ${WINDOW_MS} ms`,
      );
    }
    return low ? LOW_BUDGET_WINDOW_MS : WINDOW_MS;
  }

  /**
   * True when every commit from `since` up to `commit` is one of our own, each swapped on the one
   * before: nothing else wrote the account between them, so a listing true at `since` that took our
   * commits' writes as they landed was true all along.
   */
  provenSince(commit: string, since: string): boolean {
    for (let at: string | undefined = commit, n = 0; at !== undefined && n <= OWN_CHAIN; n++) {
      if (at === since) return true;
      at = this.#prev.get(at);
    }
    return false;
  }

  #chain(did: string, commit: string, prev: string): void {
    this.#latest.set(did, commit);
    this.#prev.set(commit, prev);
    // Oldest first: a Map keeps insertion order.
    if (this.#prev.size > OWN_CHAIN) this.#prev.delete(this.#prev.keys().next().value!);
  }

  /** Writes not yet answered (waiting, or in the commit under way), by account: for tests. */
  pending(): Record<string, number> {
    const out: Record<string, number> = this.#tables?.pending() ?? {};
    for (const a of this.#accounts.values()) {
      const n = a.queue.length + a.sending;
      if (n > 0) out[a.state.did] = (out[a.state.did] ?? 0) + n;
    }
    return out;
  }

  async #drain(acc: Account): Promise<void> {
    try {
      while (acc.queue.length > 0) {
        const batch = takeBatch(acc.queue);
        acc.sending = batch.length;
        try {
          if (batch.length === 1 && !acc.state.knows(batch[0]!.op.rkey)) await this.#single(acc, batch[0]!);
          else await this.#commit(acc, batch, 0);
        } catch (err) {
          // A failure of ours, not the PDS's answer: each write is told, none is left waiting.
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      acc.sending = 0;
      acc.busy = false;
    }
  }

  /**
   * Sends one write as it came; what it did to the account is not known exactly, so forget it. Its
   * commit joins the chain of ours when it is swapped on one of ours: a listing read before our own
   * latest commits is proven by a swap on the latest of them, and a write that names no commit is
   * tried on our latest too (a listing before it then stays proven), and sent again as it came when
   * that swap is refused: it lands or fails exactly as it would have.
   */
  async #single(acc: Account, p: Pending): Promise<void> {
    acc.state.forget();
    const latest = this.#latest.get(acc.state.did);
    let swapCommit = p.op.swapCommit;
    let body = p.body;
    const added = swapCommit === undefined && latest !== undefined;
    if (latest !== undefined && (added || this.provenSince(latest, swapCommit!))) {
      swapCommit = latest;
      body = Buffer.from(JSON.stringify({ ...(JSON.parse(body.toString('utf8')) as object), swapCommit }));
    }
    const send = (bytes: Buffer) =>
      this.#transport.request(p.url, { method: 'POST', headers: p.headers, body: bytes, ...limitOf([p]) });
    let res: HttpResponse;
    try {
      res = await send(body);
      if (added && res.status !== 200 && refusalOf(res) === 'swap-conflict') {
        swapCommit = undefined;
        res = await send(p.body);
      }
    } catch (err) {
      p.reject(err);
      return;
    }
    this.#budgets.observe(acc.key, res.headers);
    // Landed: told like a group commit's writes, before the helper hears (the views take it).
    const done = res.status === 200 ? landedAlone(p.op, res.body) : undefined;
    // Its swapCommit held at the PDS: the commit it made came right after that one.
    if (done !== undefined && swapCommit !== undefined) this.#chain(acc.state.did, done.commit, swapCommit);
    if (done !== undefined) {
      const record = p.op.kind === 'put' ? p.op.record : null;
      this.#landed(acc.state.did, done.rev, [{ rkey: p.op.rkey, record, cid: done.cid }], done.commit);
    }
    p.resolve(res);
  }

  async #commit(acc: Account, batch: Pending[], round: number): Promise<void> {
    if (round >= MAX_ROUNDS) {
      for (const p of batch) await this.#single(acc, p);
      return;
    }
    const state = acc.state;
    let at;
    const listed = round === 0 ? listingCommit(batch) : undefined;
    const known = state.commit;
    // Our own commits came since the listing's: the account is further on than it says.
    const ahead = [known, this.#latest.get(state.did)].some(
      (c) => c !== undefined && listed !== undefined && c !== listed && this.provenSince(c, listed),
    );
    try {
      if (listed !== undefined && !ahead && known !== listed) {
        // The helpers' listing is of a commit newer than (or unknown to) what this state knows:
        // swap on that commit, with the records as the listing has them (it is complete at that
        // commit, so if the account is still there, they are exact).
        state.forget();
        at = { commit: listed, rev: '', cids: new Map(batch.map((p) => [p.op.rkey, p.op.swap])) };
      } else if (listed !== undefined && known === listed) {
        // The state is at the listing's very commit: records it has not read are as listed.
        at = state.fill(batch.map((p) => [p.op.rkey, p.op.swap]));
      } else at = await state.current(batch.map((p) => p.op.rkey));
    } catch (err) {
      // The records could not be read: each write goes as it came and meets its own swap at the PDS.
      this.#log(`group commit: reading ${safeText(state.did)} failed (${safeText(String(err))})`);
      for (const p of batch) await this.#single(acc, p);
      return;
    }
    const going: Pending[] = [];
    for (const p of batch) {
      const now = at.cids.get(p.op.rkey) ?? null;
      // A write that asks for its listing to be proven goes only when nothing but our own commits
      // came since that listing's commit; otherwise it is refused as the PDS would refuse its swapCommit.
      const proven = p.op.swapCommit === undefined || this.provenSince(at.commit, p.op.swapCommit);
      if (proven && p.op.swap === now && (p.op.kind === 'put' || now !== null)) going.push(p);
      else p.resolve(swapAnswer(now));
    }
    if (going.length === 0) return;
    const auth = bestAuthorization(going);
    let res: HttpResponse;
    try {
      res = await this.#transport.request(state.url('com.atproto.repo.applyWrites'), {
        method: 'POST',
        headers: { authorization: auth, 'content-type': 'application/json' },
        body: JSON.stringify({
          repo: state.did,
          swapCommit: at.commit,
          writes: going.map((p) => state.writeOf(p.op, at.cids.get(p.op.rkey) ?? null)),
        }),
        ...limitOf(going),
      });
    } catch (err) {
      // No answer: the commit may have landed. Each helper meets this as if it had sent its own write,
      // and its retry (a swap) or its read-back finds out what happened.
      state.forget();
      for (const p of going) p.reject(err);
      return;
    }
    this.#budgets.observe(acc.key, res.headers);
    if (res.status === 200) {
      // `at` may be the state itself, which taking the answer moves on to the new commit.
      const swapped = at.commit;
      const done = state.landed(
        swapped,
        going.map((p) => p.op),
        res.body,
      );
      if (done === undefined) {
        // Landed, but the answer does not say how: the helpers read their refs back as after a lost answer.
        state.forget();
        const err = Object.assign(new Error('the PDS answered applyWrites without its results'), {
          code: 'EBADANSWER',
        });
        for (const p of going) p.reject(err);
        return;
      }
      const writes = going.map((p, i) => ({
        rkey: p.op.rkey,
        record: p.op.kind === 'put' ? p.op.record : null,
        cid: done.cids[i]!,
      }));
      this.#chain(state.did, done.commit, swapped);
      this.#landed(state.did, done.rev, writes, done.commit);
      going.forEach((p, i) => p.resolve(done.answers[i]!));
      if (going.length > 1)
        this.#log(`group commit: ${going.length} ref writes of ${safeText(state.did)} in one commit`);
      return;
    }
    const refusal = refusalOf(res);
    if (refusal === 'swap-conflict') {
      // The account moved since the state was read: read it again and decide each write anew.
      this.#log(
        `group commit: the PDS refused ${going.length} ref writes of ${safeText(state.did)} on commit ${safeText(at.commit)} (round ${round}); reading the account again`,
      );
      state.forget();
      await this.#commit(acc, going, round + 1);
      return;
    }
    if (res.status === 429 || res.status >= 500) {
      // The PDS's answer holds for each of them (rate limit, or down): each helper retries on its own.
      if (res.status >= 500) state.forget();
      for (const p of going) p.resolve(res);
      return;
    }
    // Refused for one write's sake (a blob gone, a key refused, a token), or for each helper's token:
    // sent on their own, each write gets its own answer and the others land.
    for (const p of going) await this.#single(acc, p);
  }
}

/** The next batch: up to the PDS's limit, one write per record (a second waits for the next commit). */
function takeBatch(queue: Pending[]): Pending[] {
  const batch: Pending[] = [];
  const keys = new Set<string>();
  for (let i = 0; i < queue.length && batch.length < MAX_WRITES;) {
    const p = queue[i]!;
    if (keys.has(p.op.rkey)) {
      i++;
      continue;
    }
    keys.add(p.op.rkey);
    batch.push(p);
    queue.splice(i, 1);
  }
  return batch;
}

/** The commit every write's listing was read at, when they all carry the same one. */
function listingCommit(batch: Pending[]): string | undefined {
  const first = batch[0]?.op.swapCommit;
  return first !== undefined && batch.every((p) => p.op.swapCommit === first) ? first : undefined;
}

/** The authorization that lives longest of those the writes came with (each is for this account). */
function bestAuthorization(batch: Pending[]): string {
  let best = batch[0]!;
  for (const p of batch) if (p.op.expires > best.op.expires) best = p;
  return best.op.authorization;
}

/** What kind of refusal a PDS's error answer is (see pdsRefusal). */
export function refusalOf(res: HttpResponse): ReturnType<typeof pdsRefusal> {
  let e: { error?: unknown; message?: unknown } = {};
  try {
    e = JSON.parse(res.body.toString('utf8')) as typeof e;
  } catch (err) {
    // A refusal without a JSON body is judged on its status alone.
    if (!(err instanceof SyntaxError)) throw err;
  }
  return pdsRefusal({
    status: res.status,
    error: typeof e.error === 'string' ? e.error : `HTTP${res.status}`,
    message: typeof e.message === 'string' ? e.message : '',
  });
}
