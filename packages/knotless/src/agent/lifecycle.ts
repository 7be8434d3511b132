import fs from 'node:fs';
import type http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import { agentBuild, checkPrivateDir, checkSocket } from './autostart.ts';

/** How an agent lives. */
export interface LifeOptions {
  /** Exit after this long without a request; 0: never (an agent run by hand). */
  idleMs: number;
  /** Ask the agents of other builds listening in the same directory to leave (the started agent). */
  retireOthers: boolean;
  /** The longest a request may still take once the agent stops accepting new ones. */
  drainMs: number;
  /** Called once the agent has stopped accepting and its requests in flight are answered. */
  exit(why: string): void;
}

/** What `GET /status` answers. */
export interface AgentStatus {
  build: string;
  pid: number;
  socket: string;
  startedAt: string;
  idleMs: number;
  idleForMs: number;
  active: number;
  stopping: boolean;
}

/**
 * The agent's life around its requests: binding its socket once per socket path (a lock, so that of
 * helpers racing to start agents exactly one binds), counting requests to exit when idle, answering
 * `/status` and `/stop`, and leaving cleanly: the socket goes first (so the next helper starts a new
 * agent or goes direct), then every request in flight is answered before the process ends.
 */
export class AgentLife {
  readonly #socket: string;
  readonly #log: (line: string) => void;
  readonly #opts: LifeOptions;
  readonly #started = new Date();
  #server: http.Server | undefined;
  #ino: number | undefined;
  #active = 0;
  #last = Date.now();
  #timer: NodeJS.Timeout | undefined;
  #stopping = false;

  constructor(socket: string, log: (line: string) => void, opts: LifeOptions) {
    this.#socket = socket;
    this.#log = log;
    this.#opts = opts;
  }

  status(): AgentStatus {
    return {
      build: agentBuild(),
      pid: process.pid,
      socket: this.#socket,
      startedAt: this.#started.toISOString(),
      idleMs: this.#opts.idleMs,
      idleForMs: this.#active > 0 ? 0 : Date.now() - this.#last,
      active: this.#active,
      stopping: this.#stopping,
    };
  }

  /** Counts the request; answers it when it is about the agent's life. False: not ours. */
  answer(req: http.IncomingMessage, res: http.ServerResponse): boolean {
    const url = new URL(req.url ?? '/', 'http://agent');
    if (url.pathname === '/status') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(this.status()));
      return true;
    }
    this.#active++;
    res.once('close', () => {
      this.#active--;
      this.#last = Date.now();
      // Stopping: a connection kept alive for the next request is closed once its answer is out.
      if (this.#stopping) this.#server?.closeIdleConnections();
    });
    if (url.pathname === '/stop' && req.method === 'POST') {
      const why =
        url.searchParams.get('why') === 'build' ? 'an agent of another build started' : 'asked to stop';
      res.writeHead(202).end();
      this.stop(why);
      return true;
    }
    return false;
  }

  /**
   * Binds the socket, unless an agent already answers there: false then. Under a lock on the socket
   * path (proper-lockfile, as sessions are locked), so that the check, the removal of a socket left
   * by a dead agent and the bind are one step: two agents never both remove and bind.
   */
  async bind(server: http.Server): Promise<boolean> {
    const dir = path.dirname(this.#socket);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    checkPrivateDir(dir);
    const release = await lockSocket(this.#socket);
    try {
      if (checkSocket(this.#socket) === 'ours' && (await answers(this.#socket))) return false;
      fs.rmSync(this.#socket, { force: true });
      // The directory already keeps others out; the umask closes the moment between bind and chmod.
      const umask = process.umask(0o077);
      try {
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(this.#socket, () => {
            server.off('error', reject);
            resolve();
          });
        });
      } finally {
        process.umask(umask);
      }
      fs.chmodSync(this.#socket, 0o600);
      this.#ino = fs.lstatSync(this.#socket).ino;
    } finally {
      await release();
    }
    this.#server = server;
    if (this.#opts.idleMs > 0) {
      // A check, not the deadline itself: each request moves the deadline.
      this.#timer = setInterval(() => this.#checkIdle(), Math.min(this.#opts.idleMs / 4, 30_000));
    }
    if (this.#opts.retireOthers) void this.#retireOthers();
    return true;
  }

  #checkIdle(): void {
    if (this.#active === 0 && Date.now() - this.#last >= this.#opts.idleMs)
      this.stop(`idle for ${Math.round(this.#opts.idleMs / 1000)} s`);
  }

  /**
   * Stops accepting (the socket is removed, only if it is still ours: a new agent may have bound the
   * path since), answers what is in flight, then calls `exit`. Past `drainMs` the rest is cut.
   */
  stop(why: string): void {
    if (this.#stopping) return;
    this.#stopping = true;
    clearInterval(this.#timer);
    this.#log(`stopping: ${why}`);
    const server = this.#server;
    void (async () => {
      const release = await lockSocket(this.#socket);
      try {
        const st = fs.lstatSync(this.#socket, { throwIfNoEntry: false });
        if (st !== undefined && st.ino === this.#ino) fs.rmSync(this.#socket, { force: true });
      } finally {
        await release();
      }
      if (server === undefined) return this.#opts.exit(why);
      const cut = setTimeout(() => server.closeAllConnections(), this.#opts.drainMs);
      server.close(() => {
        clearTimeout(cut);
        this.#opts.exit(why);
      });
      server.closeIdleConnections();
    })().catch((err: unknown) => {
      this.#log(`stopping failed: ${safeText(String(err))}`);
      this.#opts.exit(why);
    });
  }

  /** Asks the agents of other builds in this directory to stop once their requests are answered. */
  async #retireOthers(): Promise<void> {
    const dir = path.dirname(this.#socket);
    for (const name of fs.readdirSync(dir)) {
      const other = path.join(dir, name);
      if (!name.endsWith('.sock') || other === this.#socket) continue;
      try {
        if (checkSocket(other) !== 'ours') continue;
        await post(other, '/stop?why=build');
        this.#log(`asked the agent of another build at ${safeText(name)} to stop`);
      } catch (err) {
        // A socket left by an agent that died: nobody to ask. Anything else is worth a line.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ECONNREFUSED' && code !== 'ENOENT')
          this.#log(`asking ${safeText(name)} to stop: ${safeText(String(err))}`);
      }
    }
  }
}

async function lockSocket(socket: string): Promise<() => Promise<void>> {
  const { default: lockfile } = await import('proper-lockfile');
  try {
    return await lockfile.lock(socket, {
      realpath: false,
      stale: 10_000,
      retries: { retries: 100, minTimeout: 20, maxTimeout: 200 },
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ELOCKED') throw err;
    throw new KnotlessError(
      'usage',
      `Another process holds ${socket}.lock for long; if no agent is starting, remove it and try again.`,
    );
  }
}

/** True when something accepts a connection at `socket` (an agent); false when nobody listens. */
export function answers(socket: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const c = net.connect(socket);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ECONNREFUSED' || err.code === 'ENOENT') resolve(false);
      else reject(err);
    });
  });
}

/** One small request to an agent's socket, for its life (stop, status); the answer's body. */
export function post(socket: string, target: string, method = 'POST'): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = process
      .getBuiltinModule('node:http')
      .request(
        { socketPath: socket, path: target, method, headers: { host: 'agent' }, timeout: 5000 },
        (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => (body += d));
          res.on('end', () =>
            res.statusCode !== undefined && res.statusCode < 300
              ? resolve(body)
              : reject(new Error(`the agent answered ${target} with status ${res.statusCode}`)),
          );
        },
      );
    req.on('timeout', () => req.destroy(new Error(`the agent did not answer ${target} within 5 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** Whether a process runs (one of this user's: another user's answers EPERM, which is thrown). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}
