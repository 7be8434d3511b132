import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  // The newest revision of each account's repository the appview verified (its signed commit, by the
  // key of the account's DID document), when, and the key and PDS it was verified at: what the
  // repository page shows, and what a later read must not go back from.
  async up(db: Kysely<unknown>) {
    for (const column of ['verified_rev', 'verified_at', 'verified_key', 'verified_pds'])
      await db.schema.alterTable('owners').addColumn(column, 'text').execute();
  },
};
