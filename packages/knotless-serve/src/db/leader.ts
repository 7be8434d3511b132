import type { Client } from 'pg';

/** The advisory lock key the ingesting process holds: any 64-bit number, the same for every process. */
const LOCK_KEY = 0x6b6e6f74; // "knot"
const CHANNEL = 'knotless_changed';
/** How often a process that does not ingest tries for the lock: a dead leader is replaced within it. */
const TRY_EVERY_MS = 2000;

/** What the leadership starts and hears. */
export interface LeadershipHooks {
  /** This process took the lock: start ingesting; the returned function stops it. */
  lead(): Promise<() => Promise<void>>;
  /** The ingesting process (another one) changed a repository's refs: this one's mirror catches up. */
  changed(did: string, repo: string): void;
  log(line: string): void;
}

export interface Leadership {
  readonly leading: boolean;
  /** Tells the other processes that a repository's refs changed (called by the one ingesting). */
  announce(did: string, repo: string): void;
  close(): Promise<void>;
}

/**
 * Several knotless-serve processes on one PostgreSQL index: all serve pages and git from it, exactly
 * one follows the streams and writes. Which one is decided by a session-level advisory lock held on
 * a connection of its own: when that process dies, PostgreSQL ends its session and frees the lock,
 * and the next process to try (every 2 s) takes over. The same connection LISTENs on a channel the
 * leader NOTIFYs when refs change, so that every process keeps its own mirrors current.
 */
export async function startLeadership(conn: string, hooks: LeadershipHooks): Promise<Leadership> {
  const pg = (await import('pg')).default;
  let client: Client | undefined;
  let leading = false;
  let stopIngest: (() => Promise<void>) | undefined;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;

  const resign = async (): Promise<void> => {
    leading = false;
    const stop = stopIngest;
    stopIngest = undefined;
    await stop?.();
  };

  const connect = async (): Promise<Client> => {
    const c = new pg.Client({ connectionString: conn });
    c.on('notification', (msg) => {
      if (leading || msg.channel !== CHANNEL || msg.payload === undefined) return;
      try {
        const { did, repo } = JSON.parse(msg.payload) as { did?: unknown; repo?: unknown };
        if (typeof did === 'string' && typeof repo === 'string') hooks.changed(did, repo);
      } catch (err) {
        hooks.log(`leadership: a notification that is not JSON: ${String(err)}`);
      }
    });
    // The connection broke: the lock went with it. Stop ingesting at once (another process may
    // already have the lock) and connect again on the next try.
    c.on('error', (err) => {
      hooks.log(`leadership: the connection failed: ${err.message}`);
      if (client === c) client = undefined;
      void resign().catch((e: unknown) => hooks.log(`leadership: stopping the ingest: ${String(e)}`));
    });
    await c.connect();
    await c.query(`LISTEN ${CHANNEL}`);
    return c;
  };

  const attempt = async (): Promise<void> => {
    if (closed || leading) return;
    client ??= await connect();
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [LOCK_KEY]);
    if (rows[0]?.ok !== true || closed) return;
    leading = true;
    hooks.log('leading: this process follows the streams and writes the index');
    try {
      stopIngest = await hooks.lead();
    } catch (err) {
      // Holding the lock without ingesting would stop every process from doing it: let it go.
      leading = false;
      await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]);
      throw err;
    }
  };

  const loop = (): void => {
    timer = setTimeout(() => {
      attempt()
        .catch((err: unknown) => hooks.log(`leadership: ${String(err)}`))
        .finally(() => {
          if (!closed) loop();
        });
    }, TRY_EVERY_MS);
  };
  await attempt().catch((err: unknown) => hooks.log(`leadership: ${String(err)}`));
  loop();

  return {
    get leading() {
      return leading;
    },
    announce(did, repo) {
      const c = client;
      if (!leading || c === undefined) return;
      c.query('SELECT pg_notify($1, $2)', [CHANNEL, JSON.stringify({ did, repo })]).catch((err: unknown) =>
        hooks.log(`leadership: announcing ${did}/${repo}: ${String(err)}`),
      );
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      await resign();
      // Ending the session frees the lock for the next process.
      await client?.end();
    },
  };
}
