import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Stars (one row per record; the count is of distinct accounts), and a comment's line of a
    // round's diff.
    await db.schema
      .createTable('stars')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('cid', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('indexed_at', 'text', (c) => c.notNull())
      .addColumn('subject_did', 'text', (c) => c.notNull())
      .addColumn('subject_name', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('stars_pk', ['did', 'rkey'])
      .execute();
    await db.schema
      .createIndex('stars_subject')
      .on('stars')
      .columns(['subject_did', 'subject_name'])
      .execute();
    await db.schema.alterTable('comments').addColumn('path', 'text').execute();
    await db.schema.alterTable('comments').addColumn('line', 'integer').execute();
  },
};
