import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  // A private repository: only its name, description and that it is private are shown.
  async up(db: Kysely<unknown>) {
    await db.schema
      .alterTable('repos')
      .addColumn('private', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
  },
};
