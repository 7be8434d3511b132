import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.ts';

/** Where an event came from, so that its sequence number can be saved with its writes. */
export interface EventSource {
  service: string;
  seq: number;
}

/** Saves an event stream's position inside a write's transaction. */
export async function saveCursor(
  db: Kysely<Database> | Transaction<Database>,
  source: EventSource,
): Promise<void> {
  await db
    .insertInto('cursors')
    .values({ service: source.service, seq: source.seq })
    .onConflict((oc) => oc.column('service').doUpdateSet({ seq: source.seq }))
    .execute();
}
