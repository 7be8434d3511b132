import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Runners' checks: only each runner's latest verdict on a context of a commit is kept (a
    // replaced one is deleted), so re-running a check does not grow the table.
    await db.schema
      .createTable('checks')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('cid', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('indexed_at', 'text', (c) => c.notNull())
      .addColumn('repo_did', 'text', (c) => c.notNull())
      .addColumn('repo_name', 'text', (c) => c.notNull())
      .addColumn('sha', 'text', (c) => c.notNull())
      .addColumn('context', 'text', (c) => c.notNull())
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('target_url', 'text')
      .addColumn('description', 'text')
      .addPrimaryKeyConstraint('checks_pk', ['did', 'rkey'])
      .execute();
    await db.schema
      .createIndex('checks_commit')
      .on('checks')
      .columns(['repo_did', 'repo_name', 'sha', 'did', 'context'])
      .execute();
    // Protection records, wherever written: only the owner's, keyed by the repository's name,
    // counts (knotless-core's repoProtection decides when one is read).
    await db.schema
      .createTable('protections')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('cid', 'text')
      .addColumn('rev', 'text', (c) => c.notNull())
      .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('indexed_at', 'text', (c) => c.notNull())
      .addColumn('repo', 'text', (c) => c.notNull())
      .addColumn('branches', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('protections_pk', ['did', 'rkey'])
      .execute();
  },
};
