import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // The required checks a merge overrode: on each pull request status record as written, and on
    // the pull request as the authority rule decides it (the owner's merged status's), so that the
    // pull request's page says so for everyone.
    await db.schema.alterTable('pull_statuses').addColumn('ignored_checks', 'text').execute();
    await db.schema.alterTable('pulls').addColumn('ignored_checks', 'text').execute();
  },
};
