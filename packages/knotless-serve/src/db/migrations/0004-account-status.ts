import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  // Accounts that are not active (deactivated, taken down, suspended, deleted): hidden, not dropped.
  async up(db: Kysely<unknown>) {
    await db.schema.alterTable('owners').addColumn('status', 'text').execute();
  },
};
