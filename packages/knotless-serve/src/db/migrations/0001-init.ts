import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable('cursors')
      .addColumn('service', 'text', (c) => c.primaryKey())
      .addColumn('seq', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('owners')
      .addColumn('did', 'text', (c) => c.primaryKey())
      .addColumn('handle', 'text')
      .addColumn('pds', 'text')
      .addColumn('resolved_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('owners_handle').on('owners').column('handle').execute();
    await db.schema
      .createTable('repos')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('description', 'text')
      .addColumn('created_at', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('indexed_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('repos_pk', ['did', 'name'])
      .execute();
    await db.schema
      .createTable('refs')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('repo', 'text', (c) => c.notNull())
      .addColumn('ref', 'text', (c) => c.notNull())
      .addColumn('target', 'text')
      .addColumn('symref', 'text')
      .addColumn('peeled', 'text')
      .addColumn('packs', 'text', (c) => c.notNull())
      .addColumn('cid', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('refs_pk', ['did', 'rkey'])
      .execute();
    await db.schema.createIndex('refs_repo').on('refs').columns(['did', 'repo']).execute();
    await db.schema
      .createTable('pushes')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('repo', 'text', (c) => c.notNull())
      .addColumn('ref', 'text', (c) => c.notNull())
      .addColumn('old_target', 'text')
      .addColumn('new_target', 'text')
      .addColumn('time', 'text', (c) => c.notNull())
      .addColumn('seq', 'bigint')
      .addPrimaryKeyConstraint('pushes_pk', ['did', 'rkey', 'rev'])
      .execute();
    await db.schema.createIndex('pushes_time').on('pushes').column('time').execute();
    await db.schema.createIndex('pushes_repo').on('pushes').columns(['did', 'repo', 'time']).execute();
  },
};
