import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // A repository owner's webhooks. The secret lives here only: it is shown once when made and is
    // never written to any PDS record.
    await db.schema
      .createTable('webhooks')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('repo_did', 'text', (c) => c.notNull())
      .addColumn('repo_name', 'text', (c) => c.notNull())
      .addColumn('url', 'text', (c) => c.notNull())
      .addColumn('secret', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('webhooks_repo').on('webhooks').columns(['repo_did', 'repo_name']).execute();
    // The queue: one row per event and webhook, written in the transaction that indexed the event
    // (so it survives a restart), claimed with a lease by whichever process delivers it.
    await db.schema
      .createTable('webhook_deliveries')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('webhook_id', 'text', (c) => c.notNull())
      // What the event is, once per webhook: an event seen again (a replay) adds no delivery.
      .addColumn('event_key', 'text', (c) => c.notNull())
      .addColumn('event', 'text', (c) => c.notNull())
      .addColumn('payload', 'text', (c) => c.notNull())
      // pending, delivered or failed.
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('next_at', 'text', (c) => c.notNull())
      .addColumn('lease_until', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('webhook_deliveries_event', ['webhook_id', 'event_key'])
      .execute();
    await db.schema
      .createIndex('webhook_deliveries_due')
      .on('webhook_deliveries')
      .columns(['state', 'next_at'])
      .execute();
    // Each attempt's answer: the delivery log.
    await db.schema
      .createTable('webhook_attempts')
      .addColumn('delivery_id', 'text', (c) => c.notNull())
      .addColumn('at', 'text', (c) => c.notNull())
      .addColumn('status', 'integer')
      .addColumn('error', 'text')
      .execute();
    await db.schema
      .createIndex('webhook_attempts_delivery')
      .on('webhook_attempts')
      .column('delivery_id')
      .execute();
  },
};
