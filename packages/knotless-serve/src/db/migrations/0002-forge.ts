import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

export const migration: Migration = {
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
};
