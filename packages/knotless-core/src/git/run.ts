import type { Writable } from 'node:stream';
import { currentCaller } from '../caller/scope.ts';
import { NESTED_MARKER } from '../config/env.ts';
import { launchGit, NOT_LAUNCHED } from './launch.ts';

/** A git command that failed; its stderr says why. */
export class GitError extends Error {
  override name = 'GitError';
  readonly code: number | null;
  readonly stderr: string;

  constructor(args: string[], code: number | null, stderr: string) {
    super(`git ${args[0] ?? ''} failed (${code}): ${stderr.trim().split('\n').slice(-3).join(' / ')}`);
    this.code = code;
    this.stderr = stderr;
  }
}

/** Options for {@link runGit}. */
export interface RunGitOptions {
  /** stdin: bytes, or pieces written as git reads them (a pack streamed from disk). */
  input?: Uint8Array | string | AsyncIterable<Uint8Array>;
  /** Sends stdout to this existing file instead of memory (a pack written by pack-objects). */
  stdoutFile?: string;
  /** Let git's stderr through to ours (progress meters), instead of capturing it. */
  passStderr?: boolean;
  /** Exit codes that are answers rather than failures (e.g. 1 for merge-base --is-ancestor). */
  okCodes?: number[];
  /** Run on this repository instead of the one the environment names. */
  gitDir?: string;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Kills git when aborted (the appview's per-request time limit); the promise rejects. */
  signal?: AbortSignal;
}

/**
 * Runs git with the caller's environment (GIT_DIR included) and returns its stdout and exit code. Work
 * done for another process (caller/scope.ts) runs git in that process's directory and environment, and
 * its stderr passes through to that process's.
 */
export async function runGit(
  args: string[],
  opts: RunGitOptions = {},
): Promise<{ stdout: Buffer; code: number }> {
  try {
    return await runOnce(args, opts);
  } catch (err) {
    // The agent's git spawner refused the command before anything of it ran: it is started here.
    if ((err as NodeJS.ErrnoException).code === NOT_LAUNCHED) return runOnce(args, opts);
    throw err;
  }
}

function runOnce(args: string[], opts: RunGitOptions): Promise<{ stdout: Buffer; code: number }> {
  return new Promise((resolve, reject) => {
    const caller = currentCaller();
    const env = {
      ...(caller?.env ?? process.env),
      [NESTED_MARKER]: '1',
      GIT_NO_LAZY_FETCH: '1',
      ...(opts.gitDir === undefined ? {} : { GIT_DIR: opts.gitDir }),
      ...opts.env,
    };
    const input = opts.input ?? '';
    // git given no input reads /dev/null: nothing is written to it, nothing can fail to be.
    const none = (typeof input === 'string' || input instanceof Uint8Array) && input.length === 0;
    const child = launchGit(args, {
      env,
      stdin: none ? 'ignore' : 'pipe',
      stderr: opts.passStderr && caller === undefined ? 'inherit' : 'pipe',
      ...(opts.stdoutFile === undefined ? {} : { stdoutFile: opts.stdoutFile }),
      ...(caller === undefined ? {} : { cwd: caller.cwd }),
      ...(opts.signal === undefined ? {} : { signal: opts.signal }),
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout?.on('data', (d: Buffer) => out.push(d));
    if (opts.passStderr && caller !== undefined)
      child.stderr?.setEncoding('utf8').on('data', (d: string) => caller.stderr(d));
    else child.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
    child.on('error', reject);
    child.on('close', (code: number | null) => {
      if (code === 0 || (code !== null && opts.okCodes?.includes(code)))
        resolve({ stdout: Buffer.concat(out), code });
      else reject(new GitError(args, code, err));
    });
    if (none) return;
    child.stdin!.on('error', () => {
      // git may exit before reading all input (e.g. on a bad argument); its exit code tells.
    });
    if (typeof input === 'string' || input instanceof Uint8Array) child.stdin!.end(input);
    // Piped with backpressure: a piece is read only when git has taken the last one, and the first
    // only once git runs: a command that never started (and runs again) has taken nothing of it.
    else
      child.once('spawn', () => {
        void pump(input, child.stdin!).catch((err: Error) => {
          // Reading the input failed (a pack file): git must not wait for the rest of it.
          child.kill();
          reject(err);
        });
      });
  });
}

/**
 * Writes pieces to git's stdin, each written before the next is read (a source may reuse one buffer),
 * then closes it. Stops quietly when git has closed its end: its exit code tells why.
 */
async function pump(input: AsyncIterable<Uint8Array>, stdin: Writable): Promise<void> {
  for await (const piece of input) {
    if (stdin.destroyed || stdin.writableEnded) return;
    await new Promise<void>((resolve) => stdin.write(piece, () => resolve()));
  }
  stdin.end();
}

/** Runs git and returns its stdout as text. */
export async function gitText(args: string[], opts: RunGitOptions = {}): Promise<string> {
  return (await runGit(args, opts)).stdout.toString('utf8');
}
