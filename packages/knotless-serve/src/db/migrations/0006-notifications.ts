import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Per signed-in account: when its notifications were last looked at (the header's count is
    // what came after), and the private token of its notifications feed.
    await db.schema
      .createTable('web_readers')
      .addColumn('did', 'text', (c) => c.primaryKey())
      .addColumn('seen_at', 'text', (c) => c.notNull())
      .addColumn('feed_token', 'text', (c) => c.notNull().unique())
      .execute();
  },
};
