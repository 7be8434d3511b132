import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The maintainers the owner's ref table of each repository lists (the last listing the table
    // gave whole), in the order listed: the accounts whose decisions count as the owner's.
    await db.schema
      .createTable('repo_maintainers')
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('repo', 'text', (c) => c.notNull())
      .addColumn('maintainer', 'text', (c) => c.notNull())
      .addColumn('since', 'text', (c) => c.notNull())
      .addColumn('position', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('repo_maintainers_pk', ['did', 'repo', 'maintainer'])
      .execute();
    await db.schema
      .createIndex('repo_maintainers_by')
      .on('repo_maintainers')
      .columns(['maintainer'])
      .execute();
    // Who wrote the table a push came from: null for the repository's owner, else the maintainer.
    await db.schema.alterTable('pushes').addColumn('pusher', 'text').execute();
  },
};
