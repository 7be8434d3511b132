import { spawn } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import fs from 'node:fs';
import type { Readable, Writable } from 'node:stream';

/**
 * A started git command, as much of Node's ChildProcess as `runGit` uses: `spawn` once git runs,
 * `error` when it did not start or was aborted, `close` with its exit code once its output is read.
 */
export interface GitChild extends EventEmitter {
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  kill(signal?: NodeJS.Signals): boolean;
}

/** How to start one git command. */
export interface LaunchOptions {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** 'ignore': git reads nothing (its stdin is /dev/null, and `stdin` is null); 'pipe': written by the caller. */
  stdin: 'pipe' | 'ignore';
  /** git's stdout goes to this existing file (written from its start) instead of a pipe. */
  stdoutFile?: string;
  /** 'inherit': git's stderr is this process's; 'pipe': read by the caller. */
  stderr: 'pipe' | 'inherit';
  /** Kills git (SIGKILL) when aborted; the child then emits an AbortError. */
  signal?: AbortSignal;
}

/**
 * The code of the error a launched command fails with when it surely never started (the spawner
 * could not be reached): it can be started again, here. A command the spawner may have started
 * fails with another code: it may have done its work.
 */
export const NOT_LAUNCHED = 'ENOTLAUNCHED';

/** Starts git some other way (the warm agent's spawner), or undefined to start it here. */
export type GitLauncher = (args: string[], opts: LaunchOptions) => GitChild | undefined;

let launcher: GitLauncher | undefined;

/**
 * Makes this process start its git commands through `next` (undefined: itself, the default). The
 * warm agent sets its spawner here: see spawner/host.ts for why.
 */
export function useGitLauncher(next: GitLauncher | undefined): void {
  launcher = next;
}

/** Starts `git args`: through the launcher set, else (or when it cannot) as a child of this process. */
export function launchGit(args: string[], opts: LaunchOptions): GitChild {
  const launched = launcher?.(args, opts);
  if (launched !== undefined) return launched;
  const out = opts.stdoutFile === undefined ? undefined : fs.openSync(opts.stdoutFile, 'r+');
  try {
    return spawn('git', args, {
      env: opts.env,
      stdio: [opts.stdin, out ?? 'pipe', opts.stderr],
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal, killSignal: 'SIGKILL' as const }),
    });
  } finally {
    // git has its own copy.
    if (out !== undefined) fs.closeSync(out);
  }
}
