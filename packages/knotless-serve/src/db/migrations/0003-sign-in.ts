import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
  async up(db: Kysely<unknown>) {
    // Sign-in: the OAuth library's authorizations in flight and sessions (sealed with the server's
    // key, see auth/server-key.ts), and the readers' browser sessions (the cookie's hash, never the cookie).
    await db.schema
      .createTable('oauth_states')
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('sealed', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('oauth_sessions')
      .addColumn('did', 'text', (c) => c.primaryKey())
      .addColumn('sealed', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('web_sessions')
      .addColumn('id_hash', 'text', (c) => c.primaryKey())
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('handle', 'text', (c) => c.notNull())
      .addColumn('csrf', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('web_sessions_did').on('web_sessions').column('did').execute();
  },
};
