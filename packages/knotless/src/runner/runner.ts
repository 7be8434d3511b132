// The reference CI runner: follows the owner's account on its PDS's event stream, and on each new
// head commit of a branch of one repository writes `pending`, fetches the commit with knotless://
// into a cache, runs a command in a scratch work tree with a time limit, and writes the verdict, all
// as the logged-in account (the runner). Its state (the stream's cursor, the commits reported, the
// run under way) is a file under the data folder, so a restart neither re-runs what was reported
// nor leaves a `pending` behind.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { writeCheck } from 'knotless-core/forge/checks-store';
import type { CheckState } from 'knotless-core/forge/records';
import type { ForgeStore } from 'knotless-core/forge/store';
import { readJson, writeFileAtomic } from 'knotless-core/fsutil';
import type { Identity } from 'knotless-core/identity/resolver';
import { REF_COLLECTION, refKeyPrefix } from 'knotless-core/records/collections';
import { safeText } from 'knotless-core/text/terminal';
import type { Context } from '../context.ts';
import type { SessionAuthorizer } from '../auth/store.ts';
import { parseCheck } from '../forge/records.ts';

const METHOD = 'com.atproto.sync.subscribeRepos';
/** How many reported commits the state remembers (the oldest are forgotten first). */
const DONE_KEPT = 10_000;
/** How much of the command's output the description quotes (a check's description is ≤ 300 graphemes). */
const TAIL_CHARS = 240;

export interface RunnerOptions {
  owner: Identity;
  name: string;
  /** The repository as printed: handle/name. */
  label: string;
  repoUri: string;
  context: string;
  command: string[];
  timeoutMs: number;
  /** Lines for the user (stderr). */
  log: (line: string) => void;
}

interface RunnerState {
  /** The PDS whose stream `cursor` counts in. */
  pds?: string;
  cursor?: number;
  /** Commits reported with a final verdict, oldest first, with it. */
  done: Array<[string, CheckState]>;
  /** The run under way: its pending check is written, its verdict not yet. */
  running?: { commit: string; branch: string; pid?: number };
}

/** The runner's folder for one repository and context, under the data folder. */
export function runnerDir(dataDir: string, owner: string, name: string, context: string): string {
  const id = createHash('sha256')
    .update(JSON.stringify([owner, name, context]))
    .digest('hex')
    .slice(0, 16);
  return path.join(dataDir, 'runner', `${name.replace(/[^A-Za-z0-9._-]/g, '_')}-${id}`);
}

/** Output as one line for a check's description: no control characters, the last characters kept. */
export function describeOutput(output: string): string {
  const lines = output
    // eslint-disable-next-line no-control-regex
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .split(/\r?\n|\r/)
    .map((l) => l.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, ' ').trim())
    .filter((l) => l !== '');
  const joined = lines.join(' | ');
  return joined.length > TAIL_CHARS ? `…${joined.slice(-TAIL_CHARS)}` : joined;
}

export class Runner {
  readonly #ctx: Context;
  readonly #store: ForgeStore;
  readonly #auth: SessionAuthorizer;
  readonly #o: RunnerOptions;
  readonly #dir: string;
  readonly #stateFile: string;
  #state: RunnerState;
  #child: { pid: number; kill: () => void } | undefined;
  #stopping = false;
  #wanted = false;
  #wake: (() => void) | undefined;
  /** The last sequence number the stream delivered, and the one up to which every event was handled. */
  #delivered: number | undefined;
  #wantedUpTo: number | undefined;
  readonly #abort = new AbortController();

  constructor(ctx: Context, store: ForgeStore, auth: SessionAuthorizer, o: RunnerOptions) {
    this.#ctx = ctx;
    this.#store = store;
    this.#auth = auth;
    this.#o = o;
    this.#dir = runnerDir(ctx.config.dataDir, o.owner.did, o.name, o.context);
    this.#stateFile = path.join(this.#dir, 'state.json');
    fs.mkdirSync(path.join(this.#dir, 'logs'), { recursive: true, mode: 0o700 });
    const read = readJson<RunnerState>(this.#stateFile);
    this.#state = {
      done: Array.isArray(read?.done) ? read.done : [],
      ...(read?.running ? { running: read.running } : {}),
    };
    // A cursor counts only on the PDS it was read from (the account may have moved since).
    if (read?.pds === o.owner.pds && typeof read.cursor === 'number') {
      this.#state.pds = read.pds;
      this.#state.cursor = read.cursor;
    }
    this.#delivered = this.#state.cursor;
  }

  get dir(): string {
    return this.#dir;
  }

  /** Runs until {@link stop}: recovers an interrupted run, then follows the stream and runs each new head. */
  async run(): Promise<void> {
    await this.#recover();
    const worker = this.#work();
    this.#want(undefined);
    await Promise.all([this.#follow(), worker]);
  }

  /** Stops: a command under way is killed and its check turned into `error` before {@link run} ends. */
  stop(): void {
    this.#stopping = true;
    this.#abort.abort();
    this.#child?.kill();
    this.#wake?.();
  }

  #save(): void {
    writeFileAtomic(this.#stateFile, `${JSON.stringify(this.#state)}\n`);
  }

  #isDone(commit: string): boolean {
    return this.#state.done.some(([c]) => c === commit);
  }

  async #write(commit: string, state: CheckState, description: string): Promise<void> {
    await writeCheck(this.#store, this.#auth, parseCheck, {
      repo: this.#o.repoUri,
      commit,
      context: this.#o.context,
      state,
      ...(description === '' ? {} : { description }),
    });
  }

  /** A run a killed runner left under way: its command is ended and its `pending` becomes `error`. */
  async #recover(): Promise<void> {
    const left = this.#state.running;
    if (left === undefined) return;
    if (left.pid !== undefined) killGroup(left.pid);
    await this.#write(left.commit, 'error', 'the runner stopped before the command finished; it runs again');
    this.#o.log(
      `${left.commit.slice(0, 12)} on ${safeText(left.branch)}: error (an earlier runner stopped mid-run)`,
    );
    delete this.#state.running;
    this.#save();
  }

  #want(seq: number | undefined): void {
    this.#wanted = true;
    if (seq !== undefined) this.#wantedUpTo = seq;
    this.#wake?.();
  }

  /** Scans the repository whenever an event asked for it, one scan at a time. */
  async #work(): Promise<void> {
    while (!this.#stopping) {
      if (!this.#wanted) {
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
        continue;
      }
      this.#wanted = false;
      const upTo = this.#wantedUpTo;
      try {
        await this.#scan();
      } catch (err) {
        if (this.#stopping) break;
        // The next event scans again; nothing is marked done that was not reported.
        this.#o.log(
          `reading ${this.#o.label} failed: ${safeText(err instanceof Error ? err.message : String(err))}`,
        );
        continue;
      }
      if (upTo !== undefined && !this.#stopping) {
        this.#state.pds = this.#o.owner.pds;
        this.#state.cursor = Math.max(this.#state.cursor ?? 0, upTo);
        this.#save();
      }
    }
  }

  /** Runs every branch head not yet reported, one after another. */
  async #scan(): Promise<void> {
    const remote = this.#ctx.remoteRepo(this.#o.owner, this.#o.name, (m) => this.#o.log(`warning: ${m}`));
    const refs = await remote.listRefs();
    const claims = new Map<string, string[]>();
    for (const r of refs) {
      const target = r.record.target;
      if (!r.record.ref.startsWith('refs/heads/') || target === undefined) continue;
      claims.set(r.record.ref, [...(claims.get(r.record.ref) ?? []), target]);
    }
    const heads = [...claims]
      .filter(([, targets]) => targets.length === 1)
      .map(([ref, [target]]) => ({ branch: ref.slice('refs/heads/'.length), commit: target! }))
      .sort((a, b) => (a.branch < b.branch ? -1 : a.branch > b.branch ? 1 : 0));
    for (const h of heads) {
      if (this.#stopping) return;
      if (!/^[0-9a-f]{40}$/.test(h.commit) || this.#isDone(h.commit)) continue;
      await this.#runOne(h.commit, h.branch);
    }
  }

  async #runOne(commit: string, branch: string): Promise<void> {
    const short = commit.slice(0, 12);
    const logFile = path.join(this.#dir, 'logs', `${commit}.log`);
    this.#state.running = { commit, branch };
    this.#save();
    await this.#write(commit, 'pending', `running on ${os.hostname()}`);
    this.#o.log(`${short} on ${safeText(branch)}: pending`);
    let verdict: { state: CheckState; description: string };
    try {
      verdict = await this.#execute(commit, branch, logFile);
    } catch (err) {
      // Whatever kept the command from running is this run's error, never a pending left behind.
      verdict = { state: 'error', description: describeOutput(errorText(err)) || 'the run failed' };
    }
    if (this.#stopping && verdict.state !== 'success' && verdict.state !== 'failure') {
      await this.#write(commit, 'error', 'the runner was stopped before the command finished');
      this.#o.log(`${short} on ${safeText(branch)}: error (stopped)`);
      delete this.#state.running;
      this.#save();
      return;
    }
    await this.#write(commit, verdict.state, verdict.description);
    this.#o.log(`${short} on ${safeText(branch)}: ${verdict.state} (log: ${logFile})`);
    this.#state.done.push([commit, verdict.state]);
    if (this.#state.done.length > DONE_KEPT) this.#state.done.splice(0, this.#state.done.length - DONE_KEPT);
    delete this.#state.running;
    this.#save();
  }

  /** Fetches the commit into the cache, checks it out in a scratch tree and runs the command there. */
  async #execute(
    commit: string,
    branch: string,
    logFile: string,
  ): Promise<{ state: CheckState; description: string }> {
    const cache = path.join(this.#dir, 'cache.git');
    if (!fs.existsSync(path.join(cache, 'HEAD'))) await git(['init', '-q', '--bare', cache]);
    const url = `knotless://${this.#o.owner.did}/${this.#o.name}`;
    await git([
      '--git-dir',
      cache,
      'fetch',
      '-q',
      '--no-tags',
      url,
      `+refs/heads/${branch}:refs/runner/${branch}`,
    ]).catch((err: unknown) => {
      throw new RunFailure(`the commit could not be fetched: ${describeOutput(errorText(err))}`);
    });
    const held = await git(['--git-dir', cache, 'cat-file', '-e', `${commit}^{commit}`]).then(
      () => true,
      () => false,
    );
    if (!held) throw new RunFailure(`the branch ${branch} no longer holds the commit`);
    const scratch = path.join(this.#dir, 'work');
    fs.rmSync(scratch, { recursive: true, force: true });
    await git(['--git-dir', cache, 'worktree', 'prune']);
    await git(['--git-dir', cache, 'worktree', 'add', '-q', '--detach', '-f', scratch, commit]);
    try {
      return await this.#command(commit, branch, scratch, logFile);
    } finally {
      fs.rmSync(scratch, { recursive: true, force: true });
      await git(['--git-dir', cache, 'worktree', 'prune']);
    }
  }

  #command(
    commit: string,
    branch: string,
    cwd: string,
    logFile: string,
  ): Promise<{ state: CheckState; description: string }> {
    const fd = fs.openSync(logFile, 'w', 0o600);
    const [program, ...args] = this.#o.command;
    const child = spawn(program!, args, {
      cwd,
      // Its own process group, so that a time limit or Ctrl-C ends everything it started.
      detached: true,
      stdio: ['ignore', fd, fd],
      env: {
        ...process.env,
        KNOTLESS_RUNNER_REPO: `${this.#o.owner.did}/${this.#o.name}`,
        KNOTLESS_RUNNER_BRANCH: branch,
        KNOTLESS_RUNNER_COMMIT: commit,
      },
    });
    fs.closeSync(fd);
    return new Promise((resolve) => {
      let timedOut = false;
      const kill = (): void => {
        if (child.pid !== undefined) killGroup(child.pid);
      };
      if (child.pid !== undefined) {
        this.#child = { pid: child.pid, kill };
        this.#state.running = { commit, branch, pid: child.pid };
        this.#save();
      }
      const timer = setTimeout(() => {
        timedOut = true;
        kill();
      }, this.#o.timeoutMs);
      const done = (state: CheckState, why: string): void => {
        clearTimeout(timer);
        this.#child = undefined;
        // The whole group, whatever the command left running in the background.
        kill();
        const tail = describeOutput(tailOf(logFile));
        resolve({ state, description: tail === '' ? why : `${why}: ${tail}` });
      };
      child.on('error', (err) =>
        done('error', `the command could not be started (${describeOutput(err.message)})`),
      );
      child.on('exit', (code, signal) => {
        if (timedOut) done('error', `over the time limit of ${this.#o.timeoutMs / 1000} s`);
        else if (this.#stopping) done('error', 'stopped');
        else if (code === 0) done('success', 'passed');
        else done('failure', code === null ? `killed by ${signal ?? 'a signal'}` : `exit ${code}`);
      });
    });
  }

  /**
   * Follows the owner's PDS's event stream from the saved cursor: a commit of the owner's that
   * touches this repository's refs (or a sync, account or identity event) asks for a scan; the
   * cursor is saved once the scan that followed its events is done.
   */
  async #follow(): Promise<void> {
    const { websocket, ensureChunkIsMessage } = await import('../agent/stream-libs.ts');
    const prefix = `${REF_COLLECTION}/${refKeyPrefix(this.#o.name)}`;
    let announced = false;
    const ws = websocket(
      () => {
        const base = `${this.#o.owner.pds.replace(/^http/, 'ws')}/xrpc/${METHOD}`;
        return this.#delivered === undefined ? base : `${base}?cursor=${this.#delivered}`;
      },
      {
        dataMode: 'binary',
        heartbeat: {},
        signal: this.#abort.signal,
        onOpen: () => {
          // Anything pushed while the connection opened is found by a scan made after it.
          this.#want(undefined);
          if (!announced)
            this.#o.log(
              `watching ${this.#o.label} for ${safeText(this.#o.context)} (state and logs: ${this.#dir})`,
            );
          announced = true;
        },
        onReconnect: (err) => this.#o.log(`event stream: ${safeText(errorText(err))}; reconnecting`),
      },
    );
    try {
      for await (const chunk of ws) {
        const message = ensureChunkIsMessage(chunk);
        const body = message.body as Record<string, unknown>;
        const t = message.header.t;
        const seq = typeof body['seq'] === 'number' ? body['seq'] : undefined;
        if (seq !== undefined) this.#delivered = seq;
        const did = typeof body['repo'] === 'string' ? body['repo'] : body['did'];
        if (did !== this.#o.owner.did) continue;
        const ops = Array.isArray(body['ops']) ? (body['ops'] as Array<{ path?: unknown }>) : [];
        const concerns =
          t !== '#commit' || ops.some((o) => typeof o.path === 'string' && o.path.startsWith(prefix));
        if (concerns) this.#want(seq);
      }
    } catch (err) {
      if (!this.#abort.signal.aborted) throw err;
    }
  }
}

/** A run that could not be made (the commit could not be fetched, say): its verdict is `error`. */
class RunFailure extends Error {}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (err) {
    // Already gone: nothing is left to end.
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The last 64 KiB of the log. */
function tailOf(file: string): string {
  const size = fs.statSync(file).size;
  const fd = fs.openSync(file, 'r');
  try {
    const length = Math.min(size, 65536);
    const buf = Buffer.alloc(length);
    fs.readSync(fd, buf, 0, length, size - length);
    return buf.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/** Runs git (with the helper for knotless:// on PATH, as the user has it); rejects with its stderr. */
function git(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-4096)));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(stderr.trim() || `git ${args[2] ?? ''} exited ${code}`)),
    );
  });
}
