import { fork, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough, Writable } from 'node:stream';
import { KnotlessError } from '../../errors.ts';
import { NOT_LAUNCHED, type GitChild, type LaunchOptions } from '../launch.ts';
import type { LaunchOrder, SpawnerReport, SpawnerRequest } from './wire.ts';

/**
 * The agent's side of its git spawner (host.ts): starts git commands through it, each as a
 * {@link GitChild} that behaves as Node's own child process does for `runGit`. Once the spawner is
 * gone (killed, crashed), `launch` answers undefined and the caller starts git itself.
 */
export class GitSpawner {
  readonly #proc: ChildProcess;
  readonly #socket: string;
  readonly #token: string;
  readonly #dir: string;
  readonly #running = new Map<number, SpawnedGit>();
  #next = 1;
  #gone = false;

  private constructor(proc: ChildProcess, dir: string, token: string) {
    this.#proc = proc;
    this.#dir = dir;
    this.#socket = path.join(dir, 's');
    this.#token = token;
    proc.on('message', (m: SpawnerReport) => this.#report(m));
    proc.on('exit', () => this.#lost());
    proc.on('error', () => this.#lost());
  }

  /**
   * Forks the spawner (`script`, run by this Node with `execArgv`) and waits until it listens, in a
   * directory only this user can enter, made for it and removed with it.
   */
  static async start(script: string, execArgv: string[]): Promise<GitSpawner> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-spawn-'));
    const token = crypto.randomBytes(32).toString('hex');
    const proc = fork(script, [], { execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    const spawner = new GitSpawner(proc, dir, token);
    try {
      await new Promise<void>((resolve, reject) => {
        const onMessage = (m: SpawnerReport): void => {
          if (m.op !== 'ready') return;
          proc.off('message', onMessage);
          resolve();
        };
        proc.on('message', onMessage);
        proc.once('exit', (code) => reject(new Error(`the git spawner exited (${code}) before it listened`)));
        proc.once('error', reject);
        spawner.#send({ op: 'listen', path: spawner.#socket, token });
      });
    } catch (err) {
      spawner.stop();
      throw err;
    }
    // The agent's event loop need not wait for it.
    proc.unref();
    proc.channel?.unref();
    return spawner;
  }

  /** The spawner's process id. */
  get pid(): number {
    return this.#proc.pid!;
  }

  /** Where the spawner listens. */
  get socketPath(): string {
    return this.#socket;
  }

  /** Starts `git args` through the spawner, or undefined when it is gone. */
  launch(args: string[], opts: LaunchOptions): GitChild | undefined {
    if (this.#gone) return undefined;
    // Its socket removed (a cleaner of old files in the temporary directory): git starts here.
    if (!fs.existsSync(this.#socket)) {
      this.stop();
      return undefined;
    }
    const id = this.#next++;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.env)) if (v !== undefined) env[k] = v;
    const order: LaunchOrder = {
      token: this.#token,
      id,
      args,
      env,
      ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
      ...(opts.stdoutFile === undefined ? {} : { stdoutFile: opts.stdoutFile }),
      stdin: opts.stdin,
      stderr: opts.stderr,
    };
    const conn = net.connect(this.#socket);
    const child = new SpawnedGit(
      conn,
      opts.stdin === 'pipe',
      opts.stdoutFile === undefined,
      opts.stderr === 'pipe',
      {
        kill: (signal) => this.#send({ op: 'kill', id, signal }),
        // The spawner did not take a command: it is of no more use, git starts here from now on.
        broken: () => this.stop(),
      },
    );
    this.#track(id, child);
    conn.write(`${JSON.stringify(order)}\n`);
    if (opts.signal !== undefined) child.abortOn(opts.signal);
    return child;
  }

  /** Stops the spawner (the agent is leaving); commands running through it are killed. */
  stop(): void {
    for (const id of this.#running.keys()) this.#send({ op: 'kill', id, signal: 'SIGKILL' });
    this.#proc.kill();
    this.#lost();
  }

  /**
   * Counts a command in: while any runs, the IPC channel keeps the agent's event loop alive (git's
   * end of the connection may close before the spawner's report of its exit arrives).
   */
  #track(id: number, child: SpawnedGit): void {
    this.#running.set(id, child);
    this.#proc.channel?.ref();
    const done = (): void => {
      if (!this.#running.delete(id)) return;
      if (this.#running.size === 0) this.#proc.channel?.unref();
    };
    child.once('close', done);
    child.once('error', done);
  }

  #send(m: SpawnerRequest): void {
    if (this.#proc.connected) this.#proc.send(m);
  }

  #report(m: SpawnerReport): void {
    if (m.op === 'ready') return;
    const child = this.#running.get(m.id);
    if (child === undefined) return;
    if (m.op === 'spawned') child.spawned();
    else if (m.op === 'stderr') child.stderrText(m.text);
    else if (m.op === 'exit') child.exited(m.code, m.signal);
    else child.fail(Object.assign(new Error(m.message), { code: m.code }));
  }

  /** The spawner is gone: what ran through it can no longer report, so it fails. */
  #lost(): void {
    if (this.#gone) return;
    this.#gone = true;
    fs.rmSync(this.#dir, { recursive: true, force: true });
    for (const child of this.#running.values()) child.fail(spawnerStopped());
    this.#running.clear();
  }
}

/** What a command the spawner may have started fails with when the spawner goes: one sentence. */
function spawnerStopped(cause?: Error): KnotlessError {
  return new KnotlessError(
    'cancelled',
    "The warm agent's git spawner stopped while git ran; run the command again.",
    cause === undefined ? undefined : { cause },
  );
}

/**
 * One git command started by the spawner, as `runGit` uses a child process: stdin and stdout are
 * the connection (stdin held until git is started), stderr what the spawner reports, and `close`
 * once git has exited and its stdout is read to the end.
 */
class SpawnedGit extends EventEmitter implements GitChild {
  readonly stdin: HeldStdin | null;
  readonly stdout: net.Socket | null;
  readonly stderr: PassThrough | null;
  readonly #conn: net.Socket;
  readonly #owner: { kill(signal: NodeJS.Signals): void; broken(): void };
  #started = false;
  #exit: { code: number | null } | undefined;
  #connClosed = false;
  #over = false;

  constructor(
    conn: net.Socket,
    stdin: boolean,
    stdout: boolean,
    stderr: boolean,
    owner: { kill(signal: NodeJS.Signals): void; broken(): void },
  ) {
    super();
    this.#conn = conn;
    this.#owner = owner;
    // Held here until git runs: the spawner must never read a byte meant for git. A command that
    // reads nothing has no stdin here at all: a write to git's end after git exited fails (EPIPE),
    // and Node then destroys the connection, dropping git's output still unread on it. A command
    // given input reads it all before it answers (each one knotless runs), so its writes come first.
    this.stdin = stdin ? new HeldStdin(conn) : null;
    this.stdout = stdout ? conn : null;
    this.stderr = stderr ? new PassThrough() : null;
    conn.on('close', () => {
      this.#connClosed = true;
      // Whatever git did not take of its stdin is dropped, as a pipe's writer sees EPIPE.
      this.stdin?.destroy();
      this.#maybeClose();
    });
    let connected = false;
    conn.once('connect', () => (connected = true));
    conn.on('error', (err) => {
      // git gone before reading all its stdin: its exit code tells, as with a pipe.
      if (this.#started) return void conn.destroy();
      // No connection: the spawner never read the order, so git never ran and may start elsewhere.
      // Connected, the spawner may have started git before the connection failed: it just fails.
      this.fail(
        connected
          ? spawnerStopped(err)
          : Object.assign(new Error(`the git spawner could not be reached: ${err.message}`), {
              code: NOT_LAUNCHED,
            }),
      );
      this.#owner.broken();
    });
    if (!stdout) conn.resume();
  }

  spawned(): void {
    this.#started = true;
    this.stdin?.start();
    this.emit('spawn');
  }

  stderrText(text: string): void {
    this.stderr?.write(text);
  }

  exited(code: number | null, signal: NodeJS.Signals | null): void {
    this.#exit = { code: signal === null ? code : null };
    this.stderr?.end();
    this.#maybeClose();
  }

  fail(err: Error): void {
    if (this.#over) return;
    this.#over = true;
    this.#conn.destroy();
    this.stderr?.end();
    this.emit('error', err);
  }

  abortOn(signal: AbortSignal): void {
    const onAbort = (): void => {
      this.#owner.kill('SIGKILL');
      this.fail(
        Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' }),
      );
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    this.once('close', () => signal.removeEventListener('abort', onAbort));
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    this.#owner.kill(signal);
    return true;
  }

  #maybeClose(): void {
    if (this.#over || this.#exit === undefined || !this.#connClosed) return;
    this.#over = true;
    this.emit('close', this.#exit.code);
  }
}

/**
 * git's stdin on the connection, held until git runs (the spawner must never read a byte meant for
 * git). Each write is called back once the connection took it, as a pipe's is: a writer may then
 * reuse its buffer (runGit's pump does).
 */
class HeldStdin extends Writable {
  readonly #conn: net.Socket;
  #held: Array<() => void> | undefined = [];

  constructor(conn: net.Socket) {
    super();
    this.#conn = conn;
  }

  start(): void {
    const held = this.#held ?? [];
    this.#held = undefined;
    for (const go of held) go();
  }

  #whenStarted(go: () => void): void {
    if (this.#held === undefined) go();
    else this.#held.push(go);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    // Nothing to send: no write on the connection (one after git exited would fail, see SpawnedGit).
    if (chunk.length === 0) return done();
    this.#whenStarted(() => this.#conn.write(chunk, done));
  }

  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    // Held writes go to the closed connection and are called back with its error, not left waiting.
    this.start();
    done(err);
  }

  override _final(done: (err?: Error | null) => void): void {
    this.#whenStarted(() => this.#conn.end(() => done()));
  }
}
