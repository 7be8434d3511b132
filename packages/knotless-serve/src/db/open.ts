import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import { Migrator, type MigrationProvider } from 'kysely/migration';
import { migrations } from './migrations.ts';
import type { Database } from './schema.ts';

/** Which SQL engine an index runs on; a few queries differ (case-insensitive search). */
export type Engine = 'sqlite' | 'postgres';

/** An open index database. */
export interface OpenDatabase {
  db: Kysely<Database>;
  engine: Engine;
}

/** Thrown when the index cannot be opened or migrated. */
export class IndexError extends Error {
  override name = 'IndexError';
}

/** True when `conn` names a PostgreSQL server rather than a SQLite file. */
export function isPostgres(conn: string): boolean {
  return /^postgres(ql)?:\/\//.test(conn);
}

/**
 * Opens the index: a PostgreSQL connection string (postgres://…) or a SQLite file path, and applies
 * every pending migration. The drivers load only when used, so SQLite users never load pg.
 */
export async function openDatabase(conn: string): Promise<OpenDatabase> {
  let db: Kysely<Database>;
  let engine: Engine;
  if (isPostgres(conn)) {
    const pg = (await import('pg')).default;
    // bigint columns come back as strings by default; our sequence numbers fit a JS number.
    pg.types.setTypeParser(20, (v: string) => Number(v));
    db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: conn, max: 5 }) }),
    });
    engine = 'postgres';
  } else {
    const Sqlite = (await import('better-sqlite3')).default;
    if (conn !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(conn)), { recursive: true });
    const sqlite = new Sqlite(conn);
    // WAL lets the web pages read while ingestion writes.
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('busy_timeout = 5000');
    db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    engine = 'sqlite';
  }
  const provider: MigrationProvider = { getMigrations: () => Promise.resolve(migrations) };
  const { error } = await new Migrator({ db, provider }).migrateToLatest();
  if (error !== undefined) {
    await db.destroy();
    throw new IndexError(
      `migrating the index failed: ${error instanceof Error ? error.message : JSON.stringify(error)}`,
      { cause: error },
    );
  }
  return { db, engine };
}
