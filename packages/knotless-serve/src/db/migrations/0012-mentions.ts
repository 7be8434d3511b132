import type { Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';
import { mentionedHandles, type MentionTable } from '../mentions.ts';
import type { Database } from '../schema.ts';

export const migration: Migration = {
  async up(untyped: Kysely<unknown>) {
    // The handles each pull request's, issue's and comment's text mentions (db/mentions.ts), found
    // by an exact match where a `like` pattern found look-alikes too.
    await untyped.schema
      .createTable('mentions')
      .addColumn('tab', 'text', (c) => c.notNull())
      .addColumn('did', 'text', (c) => c.notNull())
      .addColumn('rkey', 'text', (c) => c.notNull())
      .addColumn('handle', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('mentions_pk', ['tab', 'did', 'rkey', 'handle'])
      .execute();
    await untyped.schema
      .createIndex('mentions_by_handle')
      .on('mentions')
      .columns(['handle', 'tab'])
      .execute();
    // The rows indexed before: read a page at a time by their key, so an index of any size fits.
    const db = untyped as unknown as Kysely<Database>;
    for (const tab of ['pulls', 'issues', 'comments'] as MentionTable[]) {
      let last: { did: string; rkey: string } | undefined;
      for (;;) {
        const rows = await db
          .selectFrom(tab as 'comments')
          .select(['did', 'rkey', 'body'])
          .$if(last !== undefined, (q) =>
            q.where((w) =>
              w.or([w('did', '>', last!.did), w.and([w('did', '=', last!.did), w('rkey', '>', last!.rkey)])]),
            ),
          )
          .orderBy('did')
          .orderBy('rkey')
          .limit(500)
          .execute();
        for (const r of rows) {
          const handles = mentionedHandles(r.body ?? '');
          if (handles.length > 0)
            await db
              .insertInto('mentions')
              .values(handles.map((handle) => ({ tab, did: r.did, rkey: r.rkey, handle })))
              .execute();
        }
        if (rows.length < 500) break;
        last = rows.at(-1);
      }
    }
  },
};
