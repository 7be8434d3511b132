import fs from 'node:fs';
import path from 'node:path';
import { agentChildEnv, type Config } from 'knotless-core/config/env';
import { KnotlessError } from 'knotless-core/errors';
import { NODE_FLAGS } from '../paths.ts';

/** Set by scripts/build.ts in the bundles: `<version>-<hash of the sources>`. */
declare const __KNOTLESS_BUILD__: string | undefined;

/**
 * This build's identity. A started agent listens at a socket named after it, so a helper only ever
 * finds an agent of its own build (one stat), never one that speaks another version's protocol; the
 * agent of another build is asked to leave by the new one (see lifecycle.ts). Run from the sources
 * (no bundle), it is `source`.
 */
export function agentBuild(): string {
  return typeof __KNOTLESS_BUILD__ === 'string' ? __KNOTLESS_BUILD__ : 'source';
}

/** Where this build's agent listens: the socket set by hand, else this build's in the agent's directory. */
export function agentSocket(config: Config): string {
  return config.agentSocket ?? path.join(config.agentDir, `${agentBuild()}.sock`);
}

/** The agent's log, where a started agent's stdout and stderr go (never git's pipes). */
export function agentLog(config: Config): string {
  return path.join(config.agentDir, 'agent.log');
}

/** A log grown past this is moved to `agent.log.old` when the next agent starts. */
const LOG_LIMIT = 1024 * 1024;

/**
 * Security: Node cannot read a Unix socket's peer credentials (SO_PEERCRED), so the agent cannot ask
 * who connected. What keeps other users out is the filesystem: the socket lives in a directory that
 * only its owner can enter (0700; connecting needs search permission on every directory of the path)
 * and is itself 0600. Whoever can connect can send requests with their own tokens through it, and
 * read the agent's views of public repositories; nothing more (the agent holds no tokens). So before
 * a knotless process uses or creates the socket, the directory must be ours and writable by nobody
 * else (someone who could write it could put their own socket there and read the tokens our helpers
 * send), and the socket must be ours. Anything else is refused with one sentence.
 */
export function checkPrivateDir(dir: string): void {
  const st = fs.lstatSync(dir);
  const uid = process.getuid?.();
  if (!st.isDirectory())
    throw refused(`${dir} is not a directory`, 'remove it, or set KNOTLESS_AGENT_SOCKET elsewhere');
  if (uid !== undefined && st.uid !== uid)
    throw refused(
      `${dir} belongs to another user (uid ${st.uid})`,
      'remove it, or set KNOTLESS_CACHE_DIR to a directory of your own',
    );
  if ((st.mode & 0o022) !== 0)
    throw refused(
      `${dir} is writable by other users (mode ${(st.mode & 0o777).toString(8)})`,
      `run \`chmod 700 ${dir}\``,
    );
}

/** 'absent' when nothing is at `socket`; 'ours' for a socket we own; anything else is refused. */
export function checkSocket(socket: string): 'absent' | 'ours' {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(socket);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
    throw err;
  }
  const uid = process.getuid?.();
  if (!st.isSocket()) throw refused(`${socket} is not a socket`, 'remove it');
  if (uid !== undefined && st.uid !== uid)
    throw refused(`${socket} belongs to another user (uid ${st.uid})`, 'remove it');
  if ((st.mode & 0o022) !== 0) throw refused(`${socket} is writable by other users`, 'remove it');
  return 'ours';
}

function refused(what: string, todo: string): KnotlessError {
  return new KnotlessError(
    'permission-denied',
    `The warm agent's ${what}, so knotless will not use it; ${todo}.`,
  );
}

/** What a knotless process found where the agent would be. */
export interface AgentLookup {
  /** The socket to talk to, when one of ours is there. */
  socket: string | undefined;
  /** Why an agent there is not used (another user's directory or socket…), to print once. */
  refusal: string | undefined;
  /** True when this process may start an agent (no socket set by hand, an idle time, none refused). */
  mayStart: boolean;
}

/**
 * Looks for the agent at the cost of two lstat calls: no spawn, no connection (the first request
 * connects). Never creates anything.
 */
export function findAgent(config: Config): AgentLookup {
  const socket = agentSocket(config);
  const mayStart = config.agentSocket === undefined && config.agentIdleMs > 0;
  try {
    checkPrivateDir(path.dirname(socket));
    const found = checkSocket(socket);
    return { socket: found === 'ours' ? socket : undefined, refusal: undefined, mayStart };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { socket: undefined, refusal: undefined, mayStart };
    if (err instanceof KnotlessError) return { socket: undefined, refusal: err.message, mayStart: false };
    // Unreadable (EACCES, ENOTDIR…): this command goes direct and says why.
    if (code !== undefined)
      return {
        socket: undefined,
        refusal: `The warm agent's socket ${socket} could not be checked (${code}), so knotless will not use it.`,
        mayStart: false,
      };
    throw err;
  }
}

/** How to start the agent. */
export interface AgentStart {
  /** The `knotless` script to run (paths.ts's BIN_SCRIPTS; the front ends pass it). */
  bin: string;
  /** Told why the agent was not started, or could not be. */
  warn(message: string): void;
  /** A repository (`did/repo`) the agent lists as soon as it runs, for the next push. */
  warm?: string;
}

/**
 * Starts `knotless agent --auto` in the background, detached (its own session, so git's Ctrl-C and
 * hang-ups do not reach it), its output appended to the agent's log: git waits for its helper's
 * stdout and stderr to close, so the agent must hold neither. Returns at once; the agent binds its
 * socket itself, under a lock, so helpers racing to start it end with one (see lifecycle.ts).
 */
export function startAgentDetached(config: Config, how: AgentStart): void {
  fs.mkdirSync(config.agentDir, { recursive: true, mode: 0o700 });
  checkPrivateDir(config.agentDir);
  const log = agentLog(config);
  try {
    if (fs.statSync(log).size > LOG_LIMIT) fs.renameSync(log, `${log}.old`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const fd = fs.openSync(log, 'a', 0o600);
  try {
    // Loaded here only: most processes find the agent running and never start one.
    const { spawn } = process.getBuiltinModule('node:child_process');
    const args = ['agent', '--auto', ...(how.warm === undefined ? [] : ['--warm', how.warm])];
    const child = spawn(process.execPath, [...NODE_FLAGS, how.bin, ...args], {
      detached: true,
      stdio: ['ignore', fd, fd],
      // Not the repository's directory: the agent outlives the command and must not hold it.
      cwd: config.agentDir,
      env: agentChildEnv(),
    });
    // A failed start costs this command nothing: it went direct anyway.
    child.on('error', (err) => how.warn(`the warm agent could not be started (${err.message})`));
    child.unref();
  } finally {
    fs.closeSync(fd);
  }
}
