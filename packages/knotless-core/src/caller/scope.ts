import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The process a piece of work is done for, when that is not this one: the warm agent runs a thin
 * helper's commands (git's remote-helper protocol) in its own process, and everything those commands
 * do must look as if the helper had done it itself. Its git commands run in the helper's directory
 * with the environment git gave the helper (GIT_DIR, GIT_* and the rest), and what it prints goes to
 * the helper's stderr. Outside such work (every process but the agent) there is no caller, and
 * processes use their own environment, directory and fd 2.
 */
export interface Caller {
  /** The caller's environment, as git gave it to the helper. */
  readonly env: NodeJS.ProcessEnv;
  /** The caller's working directory. */
  readonly cwd: string;
  /** Writes to the caller's stderr. */
  stderr(text: string): void;
  /**
   * True once the caller went away before its work ended (git interrupted or killed): nobody will hear
   * of what is left, so it sends nothing more, as the helper would have died with git.
   */
  gone?(): boolean;
}

const scope = new AsyncLocalStorage<Caller | undefined>();

/** Runs `work` (and everything asynchronous it starts) for `caller`. */
export function forCaller<T>(caller: Caller, work: () => T): T {
  return scope.run(caller, work);
}

/**
 * Runs `work` (and everything asynchronous it starts) as this process's own, from inside a caller's:
 * the warm agent's views, event streams, group commits and log serve every caller, so none of them
 * may take on the directory, environment or stderr of the helper whose request set them going.
 */
export function forThisProcess<T>(work: () => T): T {
  return scope.run(undefined, work);
}

/**
 * `fn`, run for the caller of the work now running whoever calls it later: a helper's own callback
 * (a download's sink, an upload's source) that the agent's own work calls back.
 */
export function boundToCaller<A extends unknown[], R>(fn: (...args: A) => R): (...args: A) => R {
  const caller = scope.getStore();
  return caller === undefined ? fn : (...args) => scope.run(caller, () => fn(...args));
}

/** The caller of the work now running, or undefined in a process working for itself. */
export function currentCaller(): Caller | undefined {
  return scope.getStore();
}

/** The environment of the work now running: its caller's, else this process's. */
export function callerEnv(): NodeJS.ProcessEnv {
  return scope.getStore()?.env ?? process.env;
}
