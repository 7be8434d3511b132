import fs from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import { Migrator, type MigrationProvider } from 'kysely/migration';
import type BetterSqlite3 from 'better-sqlite3';
import { migrations } from './migrations/index.ts';
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

/**
 * Opens a SQLite file. better-sqlite3 loads its native code here, on first use: when npm could neither
 * download a prebuilt binary nor compile one, or compiled it for another Node, that is one sentence.
 */
function openSqlite(Sqlite: typeof BetterSqlite3, file: string): BetterSqlite3.Database {
  try {
    return new Sqlite(file);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code !== 'ERR_DLOPEN_FAILED' && !/Could not locate the bindings file/.test(e.message)) throw err;
    throw new IndexError(
      `better-sqlite3, the SQLite driver, has no native build for Node ${process.version}: run \`npm rebuild better-sqlite3\` where knotless-serve is installed, with this Node (it compiles with python3, make and a C++ compiler), or use --db postgres://…`,
      { cause: err },
    );
  }
}

/** True when `conn` names a PostgreSQL server rather than a SQLite file. */
export function isPostgres(conn: string): boolean {
  return /^postgres(ql)?:\/\//.test(conn);
}

/**
 * Opens the index: a PostgreSQL connection string (postgres://…) or a SQLite file path, and applies
 * every pending migration. The drivers load only when used, so SQLite users never load pg.
 */
export async function openDatabase(
  conn: string,
  log: (line: string) => void = () => {},
): Promise<OpenDatabase> {
  let db: Kysely<Database>;
  let engine: Engine;
  if (isPostgres(conn)) {
    const pg = (await import('pg')).default;
    // bigint columns come back as strings by default; our sequence numbers fit a JS number.
    pg.types.setTypeParser(20, (v: string) => Number(v));
    const pool = new pg.Pool({ connectionString: conn, max: 5 });
    // An idle pooled connection the server ends (a restart, pg_terminate_backend, a proxy timing
    // out) is reported on the pool; unheard, that event would end the whole process. The pool
    // drops that connection and opens a new one when next needed, so a line in the log is all.
    pool.on('error', (err) => log(`an idle PostgreSQL connection ended: ${err.message}`));
    db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    engine = 'postgres';
  } else {
    const Sqlite = (await import('better-sqlite3')).default;
    if (conn !== ':memory:') fs.mkdirSync(path.dirname(path.resolve(conn)), { recursive: true });
    const sqlite = openSqlite(Sqlite, conn);
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
