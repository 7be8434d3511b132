import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/**
 * Numbered migrations, applied in order by kysely's Migrator. Column types are the ones SQLite and
 * PostgreSQL both accept; booleans are integers so that one query works on both.
 */
export const migrations: Record<string, Migration> = {
  '0001_init': {
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
  },
  '0002_forge': {
    // The forge: pull requests, issues, their state records and comments, and a repository's forkOf.
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('repos').addColumn('fork_of', 'text').execute();
      const forge = (name: string) =>
        db.schema
          .createTable(name)
          .addColumn('did', 'text', (c) => c.notNull())
          .addColumn('rkey', 'text', (c) => c.notNull())
          .addColumn('cid', 'text')
          .addColumn('rev', 'text', (c) => c.notNull())
          .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
          .addColumn('created_at', 'text', (c) => c.notNull())
          .addColumn('indexed_at', 'text', (c) => c.notNull())
          .addPrimaryKeyConstraint(`${name}_pk`, ['did', 'rkey']);
      await forge('pulls')
        .addColumn('repo_did', 'text', (c) => c.notNull())
        .addColumn('repo_name', 'text', (c) => c.notNull())
        .addColumn('base', 'text', (c) => c.notNull())
        .addColumn('head_repo', 'text', (c) => c.notNull())
        .addColumn('head_branch', 'text', (c) => c.notNull())
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('body', 'text')
        .addColumn('rounds', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('merged', 'text')
        .addColumn('labels', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('pulls_repo')
        .on('pulls')
        .columns(['repo_did', 'repo_name', 'state', 'created_at'])
        .execute();
      await forge('pull_statuses')
        .addColumn('pull_did', 'text', (c) => c.notNull())
        .addColumn('pull_rkey', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) => c.notNull())
        .addColumn('merged', 'text')
        .addColumn('labels', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('pull_statuses_pull')
        .on('pull_statuses')
        .columns(['pull_did', 'pull_rkey'])
        .execute();
      await forge('issues')
        .addColumn('repo_did', 'text', (c) => c.notNull())
        .addColumn('repo_name', 'text', (c) => c.notNull())
        .addColumn('title', 'text', (c) => c.notNull())
        .addColumn('body', 'text')
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('labels', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('issues_repo')
        .on('issues')
        .columns(['repo_did', 'repo_name', 'state', 'created_at'])
        .execute();
      await forge('issue_states')
        .addColumn('issue_did', 'text', (c) => c.notNull())
        .addColumn('issue_rkey', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('labels', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('issue_states_issue')
        .on('issue_states')
        .columns(['issue_did', 'issue_rkey'])
        .execute();
      await forge('comments')
        .addColumn('subject_did', 'text', (c) => c.notNull())
        .addColumn('subject_collection', 'text', (c) => c.notNull())
        .addColumn('subject_rkey', 'text', (c) => c.notNull())
        .addColumn('round', 'integer')
        .addColumn('body', 'text', (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('comments_subject')
        .on('comments')
        .columns(['subject_did', 'subject_rkey', 'created_at'])
        .execute();
    },
  },
  '0003_sign_in': {
    async up(db: Kysely<unknown>) {
      // Sign-in: the OAuth library's authorizations in flight and sessions (sealed with the server's
      // key, see auth/seal.ts), and the readers' browser sessions (the cookie's hash, never the cookie).
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
  },
  '0004_account_status': {
    // Accounts that are not active (deactivated, taken down, suspended, deleted): hidden, not dropped.
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable('owners').addColumn('status', 'text').execute();
    },
  },
  '0005_private_repos': {
    // A private repository: only its name, description and that it is private are shown.
    async up(db: Kysely<unknown>) {
      await db.schema
        .alterTable('repos')
        .addColumn('private', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
    },
  },
  '0006_notifications': {
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
  },
  '0007_stars_and_line_comments': {
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
  },
};
