// Two knotless-serve processes (the installed bundle) on one PostgreSQL index: exactly one ingests,
// both serve the same pages from their own mirrors; when the ingesting one is killed (SIGKILL: no
// orderly close), the other takes over the stream and shows the next push.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { get, waitFor } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';

const BIN = path.resolve(import.meta.dirname, '../bin/knotless-serve.cjs');
const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test');
let pg: PgServer;
before(async () => {
  pg = await startPostgres();
});
after(async () => {
  await pg?.stop();
});

interface Serve {
  child: ChildProcess;
  url: string;
  /** Everything it wrote on stderr so far. */
  log(): string;
  exited: Promise<unknown>;
}

async function serve(db: string): Promise<Serve> {
  const child = spawn(
    process.execPath,
    [
      BIN,
      ...['--db', db, '--data', t.tmpdir(), '--port', '0', '--dev', '--plc', t.net.plcUrl],
      ...['--firehose', t.net.pdsUrl.replace(/^http/, 'ws'), '--public-url', 'http://appview.test'],
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const exited = new Promise((r) => child.once('exit', r));
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      const m = /listening on (http:\/\/\S+)/.exec(stderr);
      if (m !== null) resolve(m[1]!);
    });
    void exited.then(() => reject(new Error(`knotless-serve exited: ${stderr}`)));
  });
  return { child, url, log: () => stderr, exited };
}

async function push(repo: string, file: string): Promise<void> {
  assert.equal((await alice.knotless('repo', 'create', repo)).code, 0);
  const dir = await newRepo(alice, `knotless://alice.test/${repo}`);
  await commitFiles(alice, dir, { [file]: `${file}\n` }, `add ${file}`);
  await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:refs/heads/main');
}

const shows = (s: Serve, page: string, text: string): Promise<string> =>
  waitFor(`${s.url}${page} to show ${text}`, async () => {
    const r = await get(`${s.url}${page}`);
    return r.status === 200 && r.text.includes(text) ? r.text : undefined;
  });

describe('several appviews on one PostgreSQL index', () => {
  const running: Serve[] = [];
  after(async () => {
    for (const s of running) {
      if (s.child.exitCode !== null || s.child.signalCode !== null) continue;
      s.child.kill('SIGTERM');
      await s.exited;
    }
  });

  it('one ingests, both serve the same pages, and the other takes over when it dies', async () => {
    await t.ready;
    const db = await pg.createDatabase('kl_scale_out');
    const a = await serve(db);
    running.push(a);
    await waitFor('the first process to lead', () =>
      Promise.resolve(a.log().includes('leading:') ? true : undefined),
    );
    const b = await serve(db);
    running.push(b);

    await push('shared', 'one.txt');
    const pageA = await shows(a, '/alice.test/shared', 'one.txt');
    const pageB = await shows(b, '/alice.test/shared', 'one.txt');
    assert.equal(pageB, pageA, 'both processes answer the same page');
    assert.ok(!b.log().includes('leading:'), 'only one process ingests');
    // b's mirror is its own: plain git from it has the commit.
    const tree = await get(`${b.url}/alice.test/shared/tree/main`);
    assert.equal(tree.status, 200);

    a.child.kill('SIGKILL');
    await a.exited;
    await waitFor('the second process to lead', () =>
      Promise.resolve(b.log().includes('leading:') ? true : undefined),
    );
    await push('after', 'two.txt');
    await shows(b, '/alice.test/after', 'two.txt');
  });
});
