import path from 'node:path';

/** Everything the appview is told, from the command line or the environment. */
/** How much the log says (log.ts), from the least: errors only, to everything. */
export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface ServeConfig {
  /** Mirrors, downloaded blobs and (by default) the SQLite index live here. */
  dataDir: string;
  /** A PostgreSQL connection string (postgres://…) or a SQLite file path. */
  database: string;
  host: string;
  port: number;
  /** The URL people reach the appview at, for clone commands; default http://host:port. */
  publicUrl: string | undefined;
  /** The PLC directory that resolves did:plc identities. */
  plcUrl: string;
  /** Event streams to follow (ws:// or wss:// URLs of a relay or a PDS). */
  firehoses: string[];
  /**
   * Relays (http(s) URLs of their XRPC API): every account with knotless records is found through
   * them at start (listReposByCollection) and their event stream is followed.
   */
  relays: string[];
  /** PDSes (http(s) URLs) whose accounts are backfilled with com.atproto.sync.listRepos at start. */
  backfillPdses: string[];
  /** Accounts backfilled at start. */
  backfillDids: string[];
  /** Dev mode: loopback and private addresses allowed, `.test` handles resolved through their PDS. */
  dev: boolean;
  /** The least a log line must matter to be written (log.ts). */
  logLevel: LogLevel;
  /** Largest pack the mirror downloads, and the most bytes of packs one repository may have. */
  maxPackBytes: number;
  maxRepoBytes: number;
  /** Bytes of pull request round packs one mirror takes in, all pull requests together. */
  maxRoundBytes: number;
  /** Longest a page, raw file, image or XRPC query may take before a 503, in ms. */
  requestTimeoutMs: number;
  /** Longest a smart-HTTP git request (a clone or fetch) may take before git is stopped, in ms. */
  gitTimeoutMs: number;
  /** Longest one request to a PDS may take, and the longest it may stay silent, in ms. */
  fetchTimeoutMs: number;
  fetchIdleMs: number;
  /** README images from other hosts: largest accepted, and the longest their fetch may take (ms). */
  imageMaxBytes: number;
  imageTimeoutMs: number;
  /**
   * A PEM file holding the server's ES256 (P-256) private key: it signs the OAuth client's
   * assertions (its public half is the client's JWKS) and keys the encryption of stored sessions.
   * Without it, sign-in is off, except in dev mode, which makes one in the data directory.
   */
  oauthKeyFile: string | undefined;
  /**
   * How often every account the index knows is read again whole, and the relays asked again for
   * accounts with knotless records, whatever the streams said (ms; 0: never). Events a stream lost
   * without saying so are caught up this way.
   */
  recheckMs: number;
  /**
   * The least time between two passes that read every account again because a stream said it lost
   * events (ms): a relay repeating `OutdatedCursor` gets one pass in that time, not one per message.
   */
  gapResyncMs: number;
  /** Longest one webhook post may take (ms), and the wait before its second attempt (the third waits six times as long). */
  webhookTimeoutMs: number;
  webhookRetryMs: number;
  /** Webhook posts in flight at once, in this process. */
  webhookConcurrency: number;
}

/** The defaults for every setting but the data directory. */
export function defaultConfig(dataDir: string): ServeConfig {
  return {
    dataDir,
    database: path.join(dataDir, 'index.sqlite'),
    host: '127.0.0.1',
    port: 2583,
    publicUrl: undefined,
    plcUrl: 'https://plc.directory',
    firehoses: [],
    relays: [],
    backfillPdses: [],
    backfillDids: [],
    dev: false,
    logLevel: 'info',
    maxPackBytes: 256 * 1024 * 1024,
    maxRepoBytes: 2 * 1024 * 1024 * 1024,
    maxRoundBytes: 512 * 1024 * 1024,
    // A page takes milliseconds; a clone of a big mirror over a slow link may take minutes.
    requestTimeoutMs: 30_000,
    gitTimeoutMs: 600_000,
    // One request is one blob part (a few MiB) or one small query.
    fetchTimeoutMs: 120_000,
    fetchIdleMs: 30_000,
    imageMaxBytes: 5 * 1024 * 1024,
    imageTimeoutMs: 10_000,
    recheckMs: 6 * 60 * 60 * 1000,
    gapResyncMs: 5 * 60 * 1000,
    webhookTimeoutMs: 10_000,
    webhookRetryMs: 10_000,
    webhookConcurrency: 8,
    oauthKeyFile: undefined,
  };
}
