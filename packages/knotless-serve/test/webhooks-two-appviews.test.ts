// Two appview processes (the installed bundle) on one PostgreSQL index: a webhook's deliveries go
// out once each, by either of them, and one killed (SIGKILL) while its post is in flight leaves the
// delivery to the other once its lease runs out.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { watchRequests } from 'knotless-devnet';
import { commitFiles, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { Index } from '../src/db/index-store.ts';
import { openDatabase } from '../src/db/open.ts';
import { waitFor } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';

const BIN = path.resolve(import.meta.dirname, '../bin/knotless-serve.cjs');
const PUSHES = 20;
const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test', () => ({}));
const dirs: string[] = [];
const children: ChildProcess[] = [];
let pg: PgServer | undefined;
let index: Index | undefined;

/** Starts the bundle on the shared database, with a data directory of its own (its mirrors). */
async function serve(db: string): Promise<{ child: ChildProcess; url: string }> {
  const data = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-webhooks-two-'));
  dirs.push(data);
  const c = spawn(
    process.execPath,
    [
      BIN,
      ...['--dev', '--plc', t.net.plcUrl, '--data', data, '--db', db, '--port', '0'],
      ...['--firehose', t.net.pdses[0]!.url.replace(/^http/, 'ws')],
      ...['--webhook-timeout', '2000', '--webhook-retry', '200'],
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  children.push(c);
  let err = '';
  const url = await new Promise<string>((resolve, reject) => {
    c.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m !== null) resolve(m[1]!);
    });
    c.once('exit', (code) => reject(new Error(`knotless-serve exited ${code}: ${err}`)));
  });
  return { child: c, url };
}

interface Post {
  delivery: string;
  after: string;
}

describe('webhook deliveries from two appviews on one database', () => {
  let mode: 'ok' | 'hang' = 'ok';
  const posts: Post[] = [];
  const held = new Set<http.ServerResponse>();
  // Noted as each request comes, in the order watchRequests logs them: posts[i] is its log[i].
  const server = http.createServer((req, res) => {
    const post: Post = { delivery: String(req.headers['x-knotless-delivery']), after: '' };
    posts.push(post);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      post.after = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { after: string }).after;
      if (mode === 'hang') {
        held.add(res);
        res.on('close', () => held.delete(res));
      } else res.writeHead(204).end();
    });
  });
  let watch: ReturnType<typeof watchRequests> | undefined;

  before(async () => {
    await t.ready;
    pg = await startPostgres();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    watch = watchRequests(server, () => children.map((c) => c.pid!));
  });
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    watch?.stop();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await index?.close();
    await pg?.stop();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('each push arrives under one delivery id, also across a kill of the appview posting it', async () => {
    const did = t.dids['alice.test']!;
    const conn = await pg!.createDatabase('two');
    const a = await serve(conn);
    const b = await serve(conn);
    assert.equal((await alice.knotless('repo', 'create', 'both')).code, 0);
    await waitFor('the repository indexed', async () =>
      (await fetch(`${b.url}/alice.test/both`)).status === 200 ? true : undefined,
    );
    const { db, engine } = await openDatabase(conn);
    index = new Index(db, engine);
    const hook = await index.webhooks.add(
      did,
      'both',
      `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    );

    const src = alice.dir();
    await alice.ok(src, 'init', '-q');
    const heads: string[] = [];
    const push = async (i: number) => {
      await commitFiles(alice, src, { 'n.txt': `${i}\n` }, `push ${i}`);
      await alice.ok(src, 'push', '-q', 'knotless://alice.test/both', 'main');
      heads.push((await alice.ok(src, 'rev-parse', 'HEAD')).trim());
    };
    const delivered = (n: number) =>
      waitFor(`${n} deliveries delivered`, async () => {
        const all = await index!.webhooks.deliveries(hook.id, 100);
        return all.filter((d) => d.state === 'delivered').length >= n ? all : undefined;
      });

    for (let i = 0; i < PUSHES / 2; i++) await push(i);
    await delivered(PUSHES / 2);

    // The next post is held open by the receiver: the appview that sent it dies mid-delivery.
    mode = 'hang';
    await push(PUSHES / 2);
    await waitFor('the post in flight', () => Promise.resolve(held.size === 1 ? true : undefined));
    assert.equal(posts.at(-1)!.after, heads.at(-1));
    const log = await watch!.settled();
    const sender = log.at(-1)!.pid;
    const victim = [a, b].find((x) => x.child.pid === sender);
    assert.ok(victim !== undefined, `the held post came from neither appview (pid ${sender})`);
    const survivor = victim === a ? b : a;
    const exited = new Promise((r) => victim.child.once('exit', r));
    victim.child.kill('SIGKILL');
    await exited;
    mode = 'ok';
    for (const res of held) res.destroy();

    for (let i = PUSHES / 2 + 1; i < PUSHES; i++) await push(i);
    const all = await delivered(PUSHES);

    // Each push: one delivery, delivered; its id is the one every post of that push carried.
    assert.equal(all.length, PUSHES, JSON.stringify(all.map((d) => [d.event, d.state])));
    const byHead = new Map<string, Set<string>>();
    for (const p of posts) byHead.set(p.after, (byHead.get(p.after) ?? new Set()).add(p.delivery));
    assert.deepEqual([...byHead.keys()].sort(), [...heads].sort());
    for (const [head, ids] of byHead) assert.equal(ids.size, 1, `push ${head} came under ${ids.size} ids`);
    // Only the post cut by the kill was sent twice (the second time by the survivor).
    const ids = posts.map((p) => p.delivery);
    const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
    const cut = posts.find((p) => p.after === heads[PUSHES / 2])!.delivery;
    assert.deepEqual(twice, [cut]);
    const owners = await watch!.settled();
    const resent = owners.filter((_, i) => posts[i]!.delivery === cut).map((o) => o.pid);
    assert.deepEqual(resent, [victim.child.pid, survivor.child.pid]);
    // The later pushes were indexed and posted by the survivor alone.
    const late = owners.filter((_, i) => heads.indexOf(posts[i]!.after) > PUSHES / 2).map((o) => o.pid);
    assert.deepEqual(new Set(late), new Set([survivor.child.pid]));
  });
});
