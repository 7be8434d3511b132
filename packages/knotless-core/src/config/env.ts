import path from 'node:path';
import { KnotlessError } from '../errors.ts';
import { DEFAULT_RETRY, type RetryPolicy } from './retry-policy.ts';

/**
 * Set in the environment of every git command knotless runs. git-remote-knotless refuses to start
 * when it finds it: a git command of ours that starts the helper is a lazy fetch (a repository with
 * a promisor remote), which would start git again, without bound. GIT_NO_LAZY_FETCH says the same
 * to git itself from 2.44 on; older gits ignore it, so the marker is what stops the recursion.
 */
export const NESTED_MARKER = 'KNOTLESS_NESTED';

/**
 * Every setting knotless reads from the environment, read in this one place (with the crash point
 * of {@link crashPointFromEnv}, below). git's own variables are not read: git commands inherit them.
 */
export interface Config {
  /** Sessions live here (`KNOTLESS_CONFIG_DIR`, else `$XDG_CONFIG_HOME/knotless`). */
  configDir: string;
  /** Identity resolutions and other caches (`KNOTLESS_CACHE_DIR`, else `$XDG_CACHE_HOME/knotless`). */
  cacheDir: string;
  /** Long-lived data such as the dev network (`$XDG_DATA_HOME/knotless`). */
  dataDir: string;
  /** The PLC directory that resolves did:plc identities. */
  plcUrl: string;
  /** Sends every PDS request here instead of the PDS a DID document names (a proxy, a test front). */
  service: string | undefined;
  /** A PEM file of extra certificates to trust for https. */
  caCerts: string | undefined;
  /**
   * The dev network's PDSes (`KNOTLESS_DEV_PDS`, `KNOTLESS_DEV_PDS2`): `.test` handles resolve
   * through them, asked in order, since each answers only for the accounts it holds.
   */
  devPdses: string[];
  /** Non-interactive login for agents and CI. */
  identifier: string | undefined;
  password: string | undefined;
  /** The passphrase `knotless key export` / `import` use instead of asking (KNOTLESS_KEY_PASSPHRASE). */
  keyPassphrase: string | undefined;
  /** Seconds an identity resolution stays fresh in the cache. */
  identityTtlSeconds: number;
  /** The appview whose compare link a push of a new branch prints; undefined: print none. */
  appview: string | undefined;
  /** Compact pack lists in the background after pushes (KNOTLESS_COMPACT=0 turns it off). */
  autoCompact: boolean;
  /**
   * Write each push as two packs, the structure apart from the blobs, so that a partial clone downloads
   * the structure only (KNOTLESS_PACK_SPLIT=0 writes one pack that holds anything, as before the split).
   */
  packSplit: boolean;
  /**
   * Keep public repositories on their ref table (on unless KNOTLESS_REF_TABLE=0): a push to one on ref
   * records moves it onto a table first, and `repo create` makes a new one on a table. Off keeps the
   * old layout, which versions of knotless that read only ref records can still read.
   */
  refTable: boolean;
  /** Print each request to stderr. */
  trace: boolean;
  /** Retries of transient PDS faults (KNOTLESS_RETRIES, KNOTLESS_RETRY_BASE_MS, KNOTLESS_RETRY_MAX_WAIT). */
  retry: RetryPolicy;
  /**
   * Milliseconds of waiting a PDS's 429 may ask for before a request is sent again
   * (KNOTLESS_RATE_LIMIT_WAIT, seconds, default 60; 0: never wait, fail at once): past it, the
   * command fails with one sentence saying when to try again.
   */
  rateLimitWaitMs: number;
  /**
   * Check the proofs of refs read against the account's signing key (KNOTLESS_VERIFY=0 turns it off
   * for one command, which is unsafe: security.md).
   */
  verify: boolean;
  /** Use a running warm agent when its socket exists (KNOTLESS_AGENT=0 turns it off). */
  agent: boolean;
  /**
   * Where the warm agent listens when set by hand (KNOTLESS_AGENT_SOCKET): an agent you run yourself,
   * never started automatically. Unset: the agent's directory ({@link agentDir}) holds one socket per
   * version, and helpers start the agent there themselves (agent/autostart.ts).
   */
  agentSocket: string | undefined;
  /** The started agent's private (0700) directory: `agent/` in the cache directory. */
  agentDir: string;
  /**
   * Milliseconds without a request after which a started agent exits (KNOTLESS_AGENT_IDLE, seconds,
   * default 600); 0: no agent is started automatically (a running one is still used).
   */
  agentIdleMs: number;
  /**
   * Milliseconds a thin helper waits without hearing anything from the warm agent in the middle of a
   * command before it gives up on it (KNOTLESS_AGENT_SILENCE, seconds, default 30). A working agent
   * beats several times within it, so only an agent that stopped answering reaches it.
   */
  agentSilenceMs: number;
  /** This process was started by a git command that knotless runs ({@link NESTED_MARKER} is set). */
  nested: boolean;
  /** Node's options from the environment (`NODE_OPTIONS`, as Node reads them), each word apart. */
  nodeOptions: string[];
  /** Largest git object a fetched pack may inflate to (KNOTLESS_MAX_OBJECT_SIZE, bytes). */
  maxObjectBytes: number;
  /** Milliseconds one HTTP request may take from sending to the end of its answer (KNOTLESS_HTTP_TIMEOUT, seconds). */
  httpTimeoutMs: number;
  /** The cache directory's size cap in bytes (KNOTLESS_CACHE_MAX); least recently used first out. */
  cacheMaxBytes: number;
}

/** Default for {@link Config.cacheMaxBytes}: 1 GiB. */
export const DEFAULT_CACHE_MAX_BYTES = 1024 ** 3;

const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/**
 * A size in bytes: a number, optionally followed by K, M, G or T (binary multiples; `KiB`, `MB`… read
 * the same). Undefined when unset or unreadable.
 */
export function parseSize(value: string | undefined): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(value ?? '');
  if (m === null) return undefined;
  return Math.floor(Number(m[1]) * SIZE_UNITS[m[2]!.toLowerCase()]!);
}

/** Default for {@link Config.httpTimeoutMs}: two minutes, a 5 MB blob at 42 kB/s. */
export const DEFAULT_HTTP_TIMEOUT_MS = 120_000;

/** Default for {@link Config.rateLimitWaitMs}: one minute. */
export const DEFAULT_RATE_LIMIT_WAIT_MS = 60_000;

/** Default for {@link Config.agentIdleMs}: ten minutes. */
export const DEFAULT_AGENT_IDLE_MS = 600_000;

/** Default for {@link Config.agentSilenceMs}: thirty seconds. */
export const DEFAULT_AGENT_SILENCE_MS = 30_000;

/** Default for {@link Config.maxObjectBytes}: 256 MiB. */
export const DEFAULT_MAX_OBJECT_BYTES = 256 * 1024 * 1024;

/**
 * The crash point a fault-injection test asked for (KNOTLESS_CRASH_AT), read here like every other
 * variable; only the test harness sets it (see crash.ts).
 */
export function crashPointFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return nonEmpty(env['KNOTLESS_CRASH_AT']);
}

/**
 * What the thin helper in Perl left for the Node helper that goes on from it (KNOTLESS_THIN_HANDOFF),
 * taken out of the environment as it is read: it is for this process only, never for the commands the
 * helper runs (git, an agent it starts).
 */
export function takeThinHandoff(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const handoff = env['KNOTLESS_THIN_HANDOFF'];
  delete env['KNOTLESS_THIN_HANDOFF'];
  return handoff;
}

/** The PATH a git subprocess gets where knotless builds its environment from nothing (git http-backend). */
export function childPath(env: NodeJS.ProcessEnv = process.env): string {
  return nonEmpty(env['PATH']) ?? '/usr/bin:/bin';
}

/**
 * Where git's environment puts the repository a helper works on (git sets GIT_DIR for its helpers;
 * the user may set the others): the variables that locate it, unset when empty, as git treats them.
 */
export function gitRepoEnv(env: NodeJS.ProcessEnv = process.env): {
  gitDir: string | undefined;
  objectDirectory: string | undefined;
  commonDir: string | undefined;
} {
  return {
    gitDir: nonEmpty(env['GIT_DIR']),
    objectDirectory: nonEmpty(env['GIT_OBJECT_DIRECTORY']),
    commonDir: nonEmpty(env['GIT_COMMON_DIR']),
  };
}

/**
 * The environment a started agent gets: this process's without git's variables. git sets GIT_DIR and
 * others for its helper; the agent outlives the command and serves every repository, so none of one
 * repository's settings may follow it. Nor KNOTLESS_VERIFY: it turns checks off for one command, and
 * an agent started by `KNOTLESS_VERIFY=0 git fetch` would otherwise read unchecked for every later one.
 */
export function agentChildEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(env).filter(([k]) => !k.startsWith('GIT_') && k !== 'KNOTLESS_VERIFY'),
  );
}

/** The public PLC directory, used unless KNOTLESS_PLC_URL says otherwise. */
export const DEFAULT_PLC_URL = 'https://plc.directory';

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/**
 * An http(s) base URL from the environment, without trailing slashes. A value that is none is the
 * user's mistake, said in one sentence here rather than a TypeError at the first request.
 */
function urlVar(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = nonEmpty(env[name]);
  return value === undefined ? undefined : httpBaseUrl(value, name);
}

/**
 * `value` as an http(s) base URL without trailing slashes, or a usage error naming `name` (an
 * environment variable, an option) in one sentence ending with what to do, `fix`.
 */
export function httpBaseUrl(value: string, name: string, fix = 'fix it or unset it'): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch (err) {
    if (!(err instanceof TypeError)) throw err;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new KnotlessError(
      'usage',
      `${name} is "${value}", which is not an http:// or https:// URL; ${fix}.`,
    );
  }
  return value.replace(/\/+$/, '');
}

function nonNegative(value: string | undefined, fallback: number): number {
  const n = Number(value ?? '');
  return value !== undefined && value !== '' && Number.isFinite(n) && n >= 0 ? n : fallback;
}

function xdg(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  // node:os loads only when HOME is unset: every git command reads this.
  const home = nonEmpty(env['HOME']) ?? process.getBuiltinModule('node:os').homedir();
  return nonEmpty(env[name]) ?? path.join(home, fallback);
}

/** Reads the configuration from environment variables. */
export function readConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // `0` means ask every time (a user who sets it expects no caching), so it is not the default.
  const ttl = Number(nonEmpty(env['KNOTLESS_IDENTITY_TTL']) ?? 'NaN');
  const cacheDir =
    nonEmpty(env['KNOTLESS_CACHE_DIR']) ?? path.join(xdg(env, 'XDG_CACHE_HOME', '.cache'), 'knotless');
  return {
    configDir:
      nonEmpty(env['KNOTLESS_CONFIG_DIR']) ?? path.join(xdg(env, 'XDG_CONFIG_HOME', '.config'), 'knotless'),
    cacheDir,
    dataDir: path.join(xdg(env, 'XDG_DATA_HOME', '.local/share'), 'knotless'),
    plcUrl: urlVar(env, 'KNOTLESS_PLC_URL') ?? DEFAULT_PLC_URL,
    service: urlVar(env, 'KNOTLESS_SERVICE'),
    caCerts: nonEmpty(env['KNOTLESS_CA_CERTS']),
    devPdses: [urlVar(env, 'KNOTLESS_DEV_PDS'), urlVar(env, 'KNOTLESS_DEV_PDS2')].filter(
      (u): u is string => u !== undefined,
    ),
    identifier: nonEmpty(env['KNOTLESS_IDENTIFIER']),
    password: nonEmpty(env['KNOTLESS_PASSWORD']),
    keyPassphrase: nonEmpty(env['KNOTLESS_KEY_PASSPHRASE']),
    identityTtlSeconds: Number.isFinite(ttl) && ttl >= 0 ? ttl : 24 * 3600,
    appview: urlVar(env, 'KNOTLESS_APPVIEW'),
    autoCompact: !/^(0|false|no|off)$/i.test(env['KNOTLESS_COMPACT'] ?? ''),
    packSplit: !/^(0|false|no|off)$/i.test(env['KNOTLESS_PACK_SPLIT'] ?? ''),
    refTable: !/^(0|false|no|off)$/i.test(env['KNOTLESS_REF_TABLE'] ?? ''),
    trace: /^(1|true|yes)$/i.test(env['KNOTLESS_TRACE'] ?? ''),
    verify: !/^(0|false|no|off)$/i.test(env['KNOTLESS_VERIFY'] ?? ''),
    agent: !/^(0|false|no|off)$/i.test(env['KNOTLESS_AGENT'] ?? ''),
    agentSocket: nonEmpty(env['KNOTLESS_AGENT_SOCKET']),
    agentDir: path.join(cacheDir, 'agent'),
    agentIdleMs: nonNegative(env['KNOTLESS_AGENT_IDLE'], DEFAULT_AGENT_IDLE_MS / 1000) * 1000,
    // 0 would give up on every agent at once: it means the default, like an unreadable value.
    agentSilenceMs:
      nonNegative(env['KNOTLESS_AGENT_SILENCE'], DEFAULT_AGENT_SILENCE_MS / 1000) * 1000 ||
      DEFAULT_AGENT_SILENCE_MS,
    nested: env[NESTED_MARKER] !== undefined,
    nodeOptions: (env['NODE_OPTIONS'] ?? '').split(/\s+/).filter((w) => w !== ''),
    retry: {
      retries: Math.floor(nonNegative(env['KNOTLESS_RETRIES'], DEFAULT_RETRY.retries)),
      baseMs: nonNegative(env['KNOTLESS_RETRY_BASE_MS'], DEFAULT_RETRY.baseMs),
      maxWaitMs: nonNegative(env['KNOTLESS_RETRY_MAX_WAIT'], DEFAULT_RETRY.maxWaitMs / 1000) * 1000,
    },
    rateLimitWaitMs: nonNegative(env['KNOTLESS_RATE_LIMIT_WAIT'], DEFAULT_RATE_LIMIT_WAIT_MS / 1000) * 1000,
    maxObjectBytes:
      nonNegative(env['KNOTLESS_MAX_OBJECT_SIZE'], DEFAULT_MAX_OBJECT_BYTES) || DEFAULT_MAX_OBJECT_BYTES,
    // 0 would cut every request at once: it means the default, like an unreadable value.
    httpTimeoutMs:
      nonNegative(env['KNOTLESS_HTTP_TIMEOUT'], DEFAULT_HTTP_TIMEOUT_MS / 1000) * 1000 ||
      DEFAULT_HTTP_TIMEOUT_MS,
    cacheMaxBytes: parseSize(env['KNOTLESS_CACHE_MAX']) ?? DEFAULT_CACHE_MAX_BYTES,
  };
}
