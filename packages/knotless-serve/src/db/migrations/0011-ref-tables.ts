import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Ref tables (`dev.knotless.refs`) as stored, whoever wrote them: only an account's own table of
    // its own repository (key = the repository's name, `owner` 1) gives that repository's refs.
    await db.schema
      .createTable('ref_tables')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('repo', 'text', (c) => c.notNull())
      .addColumn('owner', 'integer', (c) => c.notNull())
      .addColumn('cid', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('value', 'text')
      .addColumn('problem', 'text')
      .addColumn('indexed_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('ref_tables_pk', ['did', 'rkey'])
      .execute();
    // Their parts (`dev.knotless.refs.part`), joined by the CID the table names.
    await db.schema
      .createTable('ref_table_parts')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('cid', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('value', 'text')
      .addPrimaryKeyConstraint('ref_table_parts_pk', ['did', 'rkey'])
      .execute();
    // The refs of each repository that has an owner's table: the last listing that table gave
    // whole (or, if it never did, the refs the repository had when it appeared).
    await db.schema
      .createTable('table_refs')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('repo', 'text', (c) => c.notNull())
      .addColumn('ref', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('target', 'text')
      .addColumn('symref', 'text')
      .addColumn('peeled', 'text')
      .addColumn('packs', 'text', (c) => c.notNull())
      .addColumn('cid', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('table_refs_pk', ['did', 'repo', 'ref'])
      .execute();
  },
};
