// A real PostgreSQL server for the tests: its own cluster in a temporary directory, on a free
// loopback port, stopped after the file's tests. When the binaries are missing this fails (loudly),
// it never skips: `.ci/run` installs them.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from 'knotless-devnet';

/** A running PostgreSQL server. */
export interface PgServer {
  /** A connection string for a fresh database. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

function findBin(name: string): string {
  const dirs = [
    ...(process.env['PATH'] ?? '').split(':'),
    ...fs
      .readdirSync('/usr/lib/postgresql', { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => `/usr/lib/postgresql/${d.name}/bin`)
      .sort()
      .reverse(),
  ];
  for (const d of dirs) if (d !== '' && fs.existsSync(path.join(d, name))) return path.join(d, name);
  throw new Error(`${name} not found: install PostgreSQL (apt-get install -y postgresql)`);
}

/** Runs as root by dropping to the `postgres` (else `nobody`) user: PostgreSQL refuses to run as root. */
function asUser(): { wrap: (cmd: string, args: string[]) => [string, string[]]; uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return { wrap: (c, a) => [c, a] };
  for (const user of ['postgres', 'nobody']) {
    try {
      const uid = Number(execFileSync('id', ['-u', user]).toString().trim());
      const gid = Number(execFileSync('id', ['-g', user]).toString().trim());
      return { wrap: (c, a) => ['runuser', ['-u', user, '--', c, ...a]], uid, gid };
    } catch {
      // try the next user
    }
  }
  throw new Error('no unprivileged user to run PostgreSQL as');
}

/** Starts a PostgreSQL cluster in a new temporary directory. */
export async function startPostgres(): Promise<PgServer> {
  const initdb = findBin('initdb');
  const postgres = findBin('postgres');
  const user = asUser();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-pg-'));
  const data = path.join(dir, 'data');
  if (user.uid !== undefined) fs.chownSync(dir, user.uid, user.gid!);
  const [c1, a1] = user.wrap(initdb, [
    '-D',
    data,
    '-A',
    'trust',
    '-U',
    'knotless',
    '--no-sync',
    '-E',
    'UTF8',
  ]);
  execFileSync(c1, a1, { stdio: 'pipe' });
  const port = await freePort();
  const [c2, a2] = user.wrap(postgres, [
    '-D',
    data,
    '-p',
    String(port),
    '-h',
    '127.0.0.1',
    '-k',
    dir,
    '-c',
    'fsync=off',
    '-c',
    'full_page_writes=off',
  ]);
  // Its own process group: runuser does not pass signals on, so stop() signals the whole group.
  const child: ChildProcess = spawn(c2, a2, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
  const pg = (await import('pg')).default;
  const admin = `postgres://knotless@127.0.0.1:${port}/postgres`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    const client = new pg.Client({ connectionString: admin });
    try {
      await client.connect();
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`postgres did not start\n${log}`, { cause: err });
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      await client.query(`create database "${name.replace(/"/g, '')}"`);
      await client.end();
      return `postgres://knotless@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      process.kill(-child.pid!, 'SIGINT');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
