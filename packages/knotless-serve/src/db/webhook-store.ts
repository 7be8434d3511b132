// Webhooks and their delivery queue. Events are queued in the transaction that indexed them, one
// row per webhook keyed by what the event is, so an event seen again (a replayed stream, a
// backfill) queues nothing more and a restart loses nothing. Rows are claimed with a lease: on
// PostgreSQL, several appview processes claim with FOR UPDATE SKIP LOCKED and each delivery goes
// to one of them; a claimer that dies leaves its lease to run out, and another takes the row then.
import crypto from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Engine } from './open.ts';
import type { Database, WebhookAttemptTable, WebhookDeliveryTable, WebhookTable } from './schema.ts';

type Db = Kysely<Database> | Transaction<Database>;

/** Attempts a delivery gets before it is marked failed. */
export const MAX_ATTEMPTS = 3;

/** A webhook as it is listed: never its secret. */
export type WebhookView = Omit<WebhookTable, 'secret'>;

/** A delivery with its attempts, newest first: the delivery log. */
export interface DeliveryView {
  id: string;
  event: string;
  state: WebhookDeliveryTable['state'];
  attempts: number;
  created_at: string;
  next_at: string;
  log: Omit<WebhookAttemptTable, 'delivery_id'>[];
}

/** A claimed delivery, with what posting it needs. */
export interface Claimed {
  id: string;
  webhook_id: string;
  event: string;
  payload: string;
  attempts: number;
  url: string;
  secret: string;
  repo_did: string;
  repo_name: string;
}

/**
 * Queues `event` for every webhook of the repository, inside `tx` (the transaction indexing it).
 * `key` names the event: the same key queues nothing twice for one webhook.
 */
export async function queueEvent(
  tx: Db,
  repoDid: string,
  repoName: string,
  event: string,
  key: string,
  payload: Record<string, unknown>,
): Promise<void> {
  const hooks = await tx
    .selectFrom('webhooks')
    .select('id')
    .where('repo_did', '=', repoDid)
    .where('repo_name', '=', repoName)
    .execute();
  const now = new Date().toISOString();
  for (const h of hooks)
    await tx
      .insertInto('webhook_deliveries')
      .values({
        id: crypto.randomUUID(),
        webhook_id: h.id,
        event_key: key,
        event,
        payload: JSON.stringify(payload),
        state: 'pending',
        attempts: 0,
        next_at: now,
        lease_until: null,
        created_at: now,
      })
      .onConflict((oc) => oc.columns(['webhook_id', 'event_key']).doNothing())
      .execute();
}

export class WebhookStore {
  readonly #db: Kysely<Database>;
  readonly #engine: Engine;

  constructor(db: Kysely<Database>, engine: Engine) {
    this.#db = db;
    this.#engine = engine;
  }

  /** Adds a webhook; its secret is the one given, else 32 random bytes in hex. */
  async add(repoDid: string, repoName: string, url: string, secret?: string): Promise<WebhookTable> {
    const row: WebhookTable = {
      id: crypto.randomBytes(8).toString('hex'),
      repo_did: repoDid,
      repo_name: repoName,
      url,
      secret: secret ?? crypto.randomBytes(32).toString('hex'),
      created_at: new Date().toISOString(),
    };
    await this.#db.insertInto('webhooks').values(row).execute();
    return row;
  }

  /** A repository's webhooks, oldest first. */
  async list(repoDid: string, repoName: string): Promise<WebhookView[]> {
    return this.#db
      .selectFrom('webhooks')
      .select(['id', 'repo_did', 'repo_name', 'url', 'created_at'])
      .where('repo_did', '=', repoDid)
      .where('repo_name', '=', repoName)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  /** One webhook of a repository, or undefined. */
  async get(repoDid: string, repoName: string, id: string): Promise<WebhookView | undefined> {
    return (await this.list(repoDid, repoName)).find((h) => h.id === id);
  }

  /** Removes a webhook of a repository, with its queue and log; false when there was none. */
  async remove(repoDid: string, repoName: string, id: string): Promise<boolean> {
    return this.#db.transaction().execute(async (tx) => {
      const gone = await tx
        .deleteFrom('webhooks')
        .where('id', '=', id)
        .where('repo_did', '=', repoDid)
        .where('repo_name', '=', repoName)
        .executeTakeFirst();
      if (Number(gone.numDeletedRows) === 0) return false;
      const ids = tx.selectFrom('webhook_deliveries').select('id').where('webhook_id', '=', id);
      await tx.deleteFrom('webhook_attempts').where('delivery_id', 'in', ids).execute();
      await tx.deleteFrom('webhook_deliveries').where('webhook_id', '=', id).execute();
      return true;
    });
  }

  /** Queues a ping to one webhook (its Test button, `knotless webhook test`); the delivery's id. */
  async ping(hook: WebhookView): Promise<string> {
    const id = crypto.randomUUID();
    const now = new Date().toISOString();
    await this.#db
      .insertInto('webhook_deliveries')
      .values({
        id,
        webhook_id: hook.id,
        event_key: `ping:${id}`,
        event: 'ping',
        payload: JSON.stringify({
          event: 'ping',
          hook: { id: hook.id },
          repository: { did: hook.repo_did, name: hook.repo_name },
        }),
        state: 'pending',
        attempts: 0,
        next_at: now,
        lease_until: null,
        created_at: now,
      })
      .execute();
    return id;
  }

  /** Queues a delivery again from its first attempt (the Redeliver button); false when unknown. */
  async redeliver(hookId: string, deliveryId: string): Promise<boolean> {
    const r = await this.#db
      .updateTable('webhook_deliveries')
      .set({ state: 'pending', attempts: 0, next_at: new Date().toISOString(), lease_until: null })
      .where('id', '=', deliveryId)
      .where('webhook_id', '=', hookId)
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }

  /** A webhook's last deliveries, newest first, each with its attempts. */
  async deliveries(hookId: string, limit = 20): Promise<DeliveryView[]> {
    const rows = await this.#db
      .selectFrom('webhook_deliveries')
      .select(['id', 'event', 'state', 'attempts', 'created_at', 'next_at'])
      .where('webhook_id', '=', hookId)
      .orderBy('created_at', 'desc')
      .orderBy('id')
      .limit(limit)
      .execute();
    if (rows.length === 0) return [];
    const log = await this.#db
      .selectFrom('webhook_attempts')
      .selectAll()
      .where(
        'delivery_id',
        'in',
        rows.map((r) => r.id),
      )
      .orderBy('at', 'desc')
      .execute();
    return rows.map((r) => ({
      ...r,
      log: log.filter((a) => a.delivery_id === r.id).map(({ at, status, error }) => ({ at, status, error })),
    }));
  }

  /**
   * Claims up to `n` due deliveries for `leaseMs`: no other process takes them meanwhile. Each
   * claim counts as an attempt, so a delivery whose claimer keeps dying still ends.
   */
  async claim(n: number, leaseMs: number): Promise<Claimed[]> {
    if (n <= 0) return [];
    const now = new Date();
    const until = new Date(now.getTime() + leaseMs).toISOString();
    let due = this.#db
      .selectFrom('webhook_deliveries')
      .select('id')
      .where('state', '=', 'pending')
      .where('next_at', '<=', now.toISOString())
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<', now.toISOString())]))
      .orderBy('next_at')
      .limit(n);
    // Another process's claim in flight is passed over, not waited for.
    if (this.#engine === 'postgres') due = due.forUpdate().skipLocked();
    // One statement: on SQLite, a read then a write in one transaction would contend for the
    // write lock with another connection's (SQLITE_BUSY); on PostgreSQL the rows are locked as read.
    const ids = (
      await this.#db
        .updateTable('webhook_deliveries')
        .set((eb) => ({ lease_until: until, attempts: eb('attempts', '+', 1) }))
        .where('id', 'in', due)
        .returning('id')
        .execute()
    ).map((r) => r.id);
    if (ids.length === 0) return [];
    return this.#db
      .selectFrom('webhook_deliveries')
      .innerJoin('webhooks', 'webhooks.id', 'webhook_deliveries.webhook_id')
      .select([
        'webhook_deliveries.id',
        'webhook_deliveries.webhook_id',
        'webhook_deliveries.event',
        'webhook_deliveries.payload',
        'webhook_deliveries.attempts',
        'webhooks.url',
        'webhooks.secret',
        'webhooks.repo_did',
        'webhooks.repo_name',
      ])
      .where('webhook_deliveries.id', 'in', ids)
      .execute();
  }

  /** Keeps a push's body once its commits are known, so that a redelivery posts the same bytes. */
  async setPayload(id: string, payload: string): Promise<void> {
    await this.#db.updateTable('webhook_deliveries').set({ payload }).where('id', '=', id).execute();
  }

  /**
   * Records one attempt's outcome: delivered, or tried again after `retryMs` while attempts remain,
   * else failed.
   */
  async finish(
    d: Claimed,
    outcome: { status: number | null; error: string | null; ok: boolean },
    retryMs: number,
  ): Promise<void> {
    const now = new Date();
    await this.#db.transaction().execute(async (tx) => {
      await tx
        .insertInto('webhook_attempts')
        .values({ delivery_id: d.id, at: now.toISOString(), status: outcome.status, error: outcome.error })
        .execute();
      const state = outcome.ok ? 'delivered' : d.attempts >= MAX_ATTEMPTS ? 'failed' : 'pending';
      await tx
        .updateTable('webhook_deliveries')
        .set({
          state,
          lease_until: null,
          next_at: new Date(now.getTime() + (state === 'pending' ? retryMs : 0)).toISOString(),
        })
        .where('id', '=', d.id)
        .execute();
    });
  }
}
