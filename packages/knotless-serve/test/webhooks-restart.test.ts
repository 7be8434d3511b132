// A delivery in flight when the appview is killed (SIGKILL, the installed bundle) is delivered
// after it starts again: the queue is in its database, and the dead process's claim runs out.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitFiles, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { Index } from '../src/db/index-store.ts';
import { openDatabase } from '../src/db/open.ts';
import { waitFor } from './helpers.ts';
import { signatureHolds, startReceiver, type Receiver } from './webhook-receiver.ts';

const BIN = path.resolve(import.meta.dirname, '../bin/knotless-serve.cjs');
const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test', () => ({}));
const data = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-webhooks-restart-'));
let child: ChildProcess | undefined;
let rx: Receiver | undefined;
let index: Index | undefined;

/** Starts the bundle on the data directory; its address once it listens. */
async function serve(): Promise<string> {
  const c = spawn(
    process.execPath,
    [
      BIN,
      ...['--dev', '--plc', t.net.plcUrl, '--data', data, '--port', '0'],
      ...['--firehose', t.net.pdses[0]!.url.replace(/^http/, 'ws')],
      ...['--webhook-timeout', '3000', '--webhook-retry', '200'],
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  child = c;
  let err = '';
  return new Promise((resolve, reject) => {
    c.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (m !== null) resolve(m[1]!);
    });
    c.once('exit', (code) => reject(new Error(`knotless-serve exited ${code}: ${err}`)));
  });
}

describe('webhook deliveries across a kill', () => {
  before(async () => {
    await t.ready;
    rx = await startReceiver('hang');
  });
  after(async () => {
    child?.kill('SIGKILL');
    await index?.close();
    await rx?.close();
    fs.rmSync(data, { recursive: true, force: true });
  });

  it('a push whose post was in flight when the appview was killed arrives after it starts again', async () => {
    const did = t.dids['alice.test']!;
    const url = await serve();
    assert.equal((await alice.knotless('repo', 'create', 'kept')).code, 0);
    await waitFor('the repository indexed', async () =>
      (await fetch(`${url}/alice.test/kept`)).status === 200 ? true : undefined,
    );
    // The webhook, added to the appview's own database (its settings page does the same).
    const { db, engine } = await openDatabase(path.join(data, 'index.sqlite'));
    index = new Index(db, engine);
    const hook = await index.webhooks.add(did, 'kept', rx!.url);

    const src = alice.dir();
    await alice.ok(src, 'init', '-q');
    await commitFiles(alice, src, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/kept', 'main');
    const head = (await alice.ok(src, 'rev-parse', 'HEAD')).trim();
    // The post is in flight, held open by the receiver: the appview dies now.
    await waitFor('the post in flight', () => Promise.resolve(rx!.open() === 1 ? true : undefined));
    const exited = new Promise((r) => child!.once('exit', r));
    child!.kill('SIGKILL');
    await exited;
    const [inFlight] = await index.webhooks.deliveries(hook.id);
    assert.equal(inFlight?.state, 'pending');
    assert.deepEqual(inFlight.log, [], 'no answer was noted before the kill');

    rx!.answer('ok');
    await serve();
    const done = await waitFor('the delivery delivered after the restart', async () => {
      const [d] = await index!.webhooks.deliveries(hook.id);
      return d?.state === 'delivered' ? d : undefined;
    });
    assert.deepEqual(
      done.log.map((a) => a.status),
      [204],
    );
    assert.equal(rx!.received.length, 2);
    const [first, second] = rx!.received;
    assert.equal(second!.headers['x-knotless-delivery'], first!.headers['x-knotless-delivery']);
    assert.equal(second!.body, first!.body);
    assert.ok(signatureHolds(second!, hook.secret));
    assert.equal((JSON.parse(second!.body) as { after: string }).after, head);
  });
});
