import { REFS_COLLECTION } from 'knotless-core/records/collections';
import { isKnotlessError } from 'knotless-core/errors';
import { parseStoredTable, parseTableRead } from 'knotless-core/records/read-refs';
import {
  applyRefUpdates,
  joinRefTable,
  layoutRefTable,
  sameTableEntry,
  tableUpdates,
  type RefTable,
  type RefUpdate,
  type StoredTable,
} from 'knotless-core/records/ref-table';
import { safeText } from 'knotless-core/text/terminal';
import type { RateBudgets } from 'knotless-core/xrpc/rate-limit';
import type { HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import { budgetKey, limitOf, refusalOf, WINDOW_MS, type Pending } from './group-commit.ts';
import { landedAlone, parseWrite, swapAnswer } from './group-state.ts';
import type { TableChange, WireTable } from './views.ts';

/** Most pushes folded into one write of a table (each helper waits for the write that holds it). */
const MAX_FOLD = 64;
/** Tables of our own latest writes kept per table by CID: a queued push's base is one of them. */
const HISTORY = 16;

/**
 * The table a `putRecord` of `record` sent alone landed, from the PDS's answer, as the views take it;
 * undefined when it did not land or the answer does not say how.
 */
export function landedTable(record: unknown, res: HttpResponse): TableChange | undefined {
  const done = res.status === 200 ? landedAlone({ kind: 'put' }, res.body) : undefined;
  return done === undefined || done.cid === null
    ? undefined
    : { cid: done.cid, value: record, rev: done.rev, commit: done.commit };
}

/** What the table group asks of the follower's views (follower.ts). */
export interface TableViews {
  /** The table a ready view holds, for the account's table record `rkey`. */
  tableOf(did: string, rkey: string): WireTable | undefined;
  /** One of our table writes landed: the views take it before any helper hears. */
  tableLanded(did: string, rkey: string, change: TableChange): Promise<void>;
}

/** A table as the group knows it: its CID and revision, joined and as stored. */
interface Known {
  cid: string;
  rev: string;
  table: RefTable;
  stored: StoredTable;
}

/** One table's queue: at most one write in flight, the pushes that came meanwhile behind it. */
interface TableQueue {
  did: string;
  rkey: string;
  queue: Pending[];
  sending: number;
  busy: boolean;
  /** Tables our writes landed (and views the group parsed), by CID, oldest first. */
  known: Map<string, Known>;
  /** The table our latest write landed. */
  last: Known | undefined;
  budget: string;
}

/**
 * Group commit for ref tables (format.md, "A push is one write"): the pushes of this machine to one
 * repository whose refs are in a table each send one `putRecord` of the whole table with `swapRecord`
 * on the table they decided on. Those that reach the agent while a write of that table is under way
 * (or within a few milliseconds of each other) go as ONE `putRecord`: each push's changes are the
 * refs whose entries its table changes against the table it swapped on; a push whose refs are as
 * they were in that table in the table now (only other refs moved, by pushes of this machine) keeps
 * its decision, exactly as a helper keeps it after reading the table again (ops/push/table.ts), so
 * its changes are applied to the table now and written with the others, swapped on the table now.
 * A push one of whose own refs moved since is told its swap failed, alone: its helper reads the
 * table again and decides that ref again with git's rules. A write refused for a moved table (another
 * machine's push) is refused to each push in it, each of which decides again the same way; any other
 * refusal sends each push as it came, so that each hears its own answer. A push whose table has parts
 * (a large table) is sent as it came.
 */
export class TableGroup {
  readonly #transport: Transport;
  readonly #log: (line: string) => void;
  readonly #views: TableViews;
  readonly #budgets: RateBudgets;
  readonly #tables = new Map<string, TableQueue>();

  constructor(transport: Transport, log: (line: string) => void, views: TableViews, budgets: RateBudgets) {
    this.#transport = transport;
    this.#log = log;
    this.#views = views;
    this.#budgets = budgets;
  }

  /**
   * Takes a forwarded table write, or returns undefined when it is not one this can fold (it is
   * forwarded as it came): a bearer-authorized `putRecord` of the owner's table with a `swapRecord`,
   * or of a maintainer's own table of a team repository (their key holds `~`), which is sent alone
   * but taken into the views the moment it lands, so that their next push swaps on it.
   */
  accept(
    url: URL,
    headers: Record<string, string>,
    body: Buffer,
    deadlineMs?: number,
  ): Promise<HttpResponse> | undefined {
    const op = parseWrite(url, headers, body, REFS_COLLECTION, ['validate']);
    // The owner's own table swapped on a table that exists, or a maintainer's (created or swapped).
    const member = op?.rkey.includes('~') === true;
    if (op === undefined || op.kind !== 'put' || (op.swap === null && !member) || op.swapCommit !== undefined)
      return undefined;
    if ((JSON.parse(body.toString('utf8')) as { validate?: unknown }).validate !== false) return undefined;
    const key = `${url.origin}${url.pathname} ${op.did} ${op.rkey}`;
    let t = this.#tables.get(key);
    if (t === undefined) {
      t = {
        did: op.did,
        rkey: op.rkey,
        queue: [],
        sending: 0,
        busy: false,
        known: new Map(),
        last: undefined,
        budget: budgetKey(url, op.did),
      };
      this.#tables.set(key, t);
    }
    const table = t;
    return new Promise<HttpResponse>((resolve, reject) => {
      table.queue.push({ url, headers, body, op, deadlineMs, resolve, reject });
      if (table.busy) return;
      table.busy = true;
      setTimeout(() => void this.#drain(table), WINDOW_MS);
    });
  }

  /** Table writes not yet answered, by account: for tests (the agent's `/writes`). */
  pending(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const t of this.#tables.values()) {
      const n = t.queue.length + t.sending;
      if (n > 0) out[t.did] = (out[t.did] ?? 0) + n;
    }
    return out;
  }

  async #drain(t: TableQueue): Promise<void> {
    try {
      while (t.queue.length > 0) {
        const batch = t.queue.splice(0, MAX_FOLD);
        t.sending = batch.length;
        try {
          await this.#round(t, batch);
        } catch (err) {
          // A failure of ours, not the PDS's answer: each push is told, none is left waiting (a
          // push answered already keeps its answer).
          for (const p of batch) p.reject(err);
        }
      }
    } finally {
      t.sending = 0;
      t.busy = false;
    }
  }

  /** The newest table known: the view's (the stream's), or our own latest write's. */
  #current(t: TableQueue): Known | undefined {
    const view = this.#views.tableOf(t.did, t.rkey);
    let fromView = view === undefined ? undefined : t.known.get(view.cid);
    if (view !== undefined && fromView === undefined) {
      const label = `${safeText(t.did)}/${safeText(t.rkey)}`;
      try {
        const read = parseTableRead(t.did, t.rkey, label, view, view.parts);
        fromView = { cid: view.cid, rev: view.rev, table: read.table, stored: read.stored };
        this.#keep(t, fromView);
      } catch (err) {
        // The view took it checked: a table that fails now is not folded over, only sent as it came.
        if (!isKnotlessError(err)) throw err;
      }
    }
    const last = t.last;
    if (fromView === undefined) return last;
    return last !== undefined && last.rev > fromView.rev ? last : fromView;
  }

  #keep(t: TableQueue, known: Known): void {
    t.known.set(known.cid, known);
    if (t.known.size > HISTORY) t.known.delete(t.known.keys().next().value!);
  }

  /** A table record a push writes, joined; undefined when it has parts or no reader would take it. */
  #parse(t: TableQueue, record: unknown): Omit<Known, 'cid' | 'rev'> | undefined {
    try {
      const stored = parseStoredTable(t.did, t.rkey, `${safeText(t.did)}/${safeText(t.rkey)}`, record);
      if (stored.parts.length > 0) return undefined;
      return { table: joinRefTable(stored, []), stored };
    } catch (err) {
      // A table no reader would take: sent as it came, the PDS and every reader judge it.
      if (isKnotlessError(err)) return undefined;
      throw err;
    }
  }

  /** The refs a push's table changes against its base; undefined when it is not a push's plain write. */
  #updates(t: TableQueue, base: Known, p: Pending): RefUpdate[] | undefined {
    const next = this.#parse(t, p.op.record);
    return next === undefined ? undefined : tableUpdates(base.table, next.table);
  }

  async #round(t: TableQueue, batch: Pending[]): Promise<void> {
    let cur = this.#current(t);
    // A push may have decided on a table newer than any the group would fold onto (its helper read
    // the table again after another machine's write, while the view was being taken afresh): the
    // newest table known is the base, never an older one of ours, which every swap would miss.
    for (const p of batch) {
      const base = p.op.swap === null ? undefined : t.known.get(p.op.swap);
      if (cur !== undefined && base !== undefined && base.rev > cur.rev) cur = base;
    }
    const first = batch[0]!;
    // A team's table (the owner's naming maintainers, or a maintainer's) is written push by push:
    // each entry's `over` is the pusher's judgement against the other writers' tables, which a fold
    // would not make again.
    if (
      cur === undefined ||
      cur.table.maintainers.length > 0 ||
      cur.stored.parts.length > 0 ||
      (batch.length === 1 && first.op.swap === cur.cid)
    ) {
      for (const p of batch) await this.#alone(t, p);
      return;
    }
    const folded: Array<{ p: Pending; updates: RefUpdate[] }> = [];
    const alone: Pending[] = [];
    const later: Pending[] = [];
    const touched = new Set<string>();
    const entry = (table: RefTable, ref: string) => table.refs.find((r) => r.ref === ref);
    for (const p of batch) {
      const base = p.op.swap === cur.cid ? cur : t.known.get(p.op.swap!);
      const updates = base === undefined ? undefined : this.#updates(t, base, p);
      if (base === undefined || updates === undefined) alone.push(p);
      else if (updates.some((u) => !sameTableEntry(entry(base.table, u.ref), entry(cur.table, u.ref))))
        // One of its own refs moved since the table it decided on: its helper decides again.
        p.resolve(swapAnswer(cur.cid));
      else if (updates.some((u) => touched.has(u.ref)))
        // Another push in this write changes the same ref: it is judged against that write's table.
        later.push(p);
      else {
        for (const u of updates) touched.add(u.ref);
        folded.push({ p, updates });
      }
    }
    t.queue.unshift(...later);
    if (folded.length === 1 && folded[0]!.p.op.swap === cur.cid) alone.unshift(folded[0]!.p);
    else if (folded.length > 0) await this.#fold(t, cur, folded);
    for (const p of alone) await this.#alone(t, p);
  }

  /** The pushes' changes applied to the table now, written as one `putRecord` swapped on it. */
  async #fold(t: TableQueue, cur: Known, folded: Array<{ p: Pending; updates: RefUpdate[] }>): Promise<void> {
    const going = folded.map((f) => f.p);
    const next = applyRefUpdates(
      cur.table,
      folded.flatMap((f) => f.updates),
      { repo: cur.table.repo, maintainer: false },
      new Date(),
    );
    const { recordCid } = await import('knotless-core/records/proof');
    const writes = await layoutRefTable(next, t.rkey, (v) => Promise.resolve(recordCid(v)), {
      table: cur.stored,
      joined: cur.table,
    });
    // A table that now needs parts is not written here: each push goes as it came.
    if (writes.create.length > 0 || writes.remove.length > 0) {
      for (const p of going) await this.#alone(t, p);
      return;
    }
    let best = going[0]!;
    for (const p of going) if (p.op.expires > best.op.expires) best = p;
    let res: HttpResponse;
    try {
      res = await this.#transport.request(going[0]!.url, {
        method: 'POST',
        headers: { authorization: best.op.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({
          repo: t.did,
          collection: REFS_COLLECTION,
          rkey: t.rkey,
          record: writes.table,
          swapRecord: cur.cid,
          validate: false,
        }),
        ...limitOf(going),
      });
    } catch (err) {
      // No answer: the write may have landed. Each helper meets this as after its own write, and
      // reads the table back.
      for (const p of going) p.reject(err);
      return;
    }
    this.#budgets.observe(t.budget, res.headers);
    if (res.status === 200) {
      const done = landedAlone(best.op, res.body);
      if (done === undefined || done.cid === null) {
        const err = Object.assign(new Error('the PDS answered putRecord without the record and commit'), {
          code: 'EBADANSWER',
        });
        for (const p of going) p.reject(err);
        return;
      }
      const known: Known = {
        cid: done.cid,
        rev: done.rev,
        table: next,
        stored: { ...next, parts: [], gone: [] },
      };
      this.#keep(t, known);
      t.last = known;
      await this.#views.tableLanded(t.did, t.rkey, {
        cid: done.cid,
        value: writes.table,
        rev: done.rev,
        commit: done.commit,
      });
      for (const p of going) p.resolve(res);
      if (going.length > 1)
        this.#log(
          `group commit: ${going.length} pushes to ${safeText(t.did)}/${safeText(t.rkey)} in one write of its ref table`,
        );
      return;
    }
    const refusal = refusalOf(res);
    // The table moved (another machine), or the PDS refuses everyone alike: each push hears it.
    if (refusal === 'swap-conflict' || res.status === 429 || res.status >= 500) {
      for (const p of going) p.resolve(res);
      return;
    }
    // Refused for one push's sake (a blob gone, a token): each goes as it came and hears its own.
    for (const p of going) await this.#alone(t, p);
  }

  /** Sends one push's write as it came; when it lands, the views take its table first. */
  async #alone(t: TableQueue, p: Pending): Promise<void> {
    let res: HttpResponse;
    try {
      res = await this.#transport.request(p.url, {
        method: 'POST',
        headers: p.headers,
        body: p.body,
        ...limitOf([p]),
      });
    } catch (err) {
      p.reject(err);
      return;
    }
    this.#budgets.observe(t.budget, res.headers);
    const change = landedTable(p.op.record, res);
    if (change !== undefined) {
      // Known here only without parts (whose records the group does not hold): else the view's.
      const known = this.#parse(t, p.op.record);
      t.last = known === undefined ? undefined : { ...known, cid: change.cid, rev: change.rev };
      if (t.last !== undefined) this.#keep(t, t.last);
      await this.#views.tableLanded(t.did, t.rkey, change);
    }
    p.resolve(res);
  }
}
