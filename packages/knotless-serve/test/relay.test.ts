// An appview given nothing but a relay: it finds every account with knotless records through the
// relay's listReposByCollection (or, without it, listRepos and describeRepo), reads them whole, and
// follows the relay's stream. The relay is the dev network's stand-in, over the real reference PDS.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startRelay, type Relay } from 'knotless-devnet';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { relayStream, type Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor } from './helpers.ts';

const t = useNetwork(['alice.test', 'bob.test'], { pdses: 2 });
const alice = useGitUser(t, 'alice.test');
const bob = useGitUser(t, 'bob.test');

/** An appview that knows only `relay`: no PDS, no account, no stream of a PDS. */
function onlyRelay(relay: Relay, database: string, dataDir?: string): Promise<Appview> {
  return appviewOn(t, database, dataDir, { firehoses: [], relays: [relay.url] });
}

async function pageShows(app: Appview, page: string, text: string): Promise<void> {
  await waitFor(`${page} to show ${text}`, async () => {
    const r = await get(`${app.url}${page}`);
    return r.status === 200 && r.text.includes(text) ? true : undefined;
  });
}

async function pushCommit(repo: string, file: string): Promise<void> {
  const dir = await newRepo(alice, `knotless://alice.test/${repo}`);
  await commitFiles(alice, dir, { [file]: 'x\n' }, `add ${file}`);
  await alice.ok(dir, 'push', '-q', 'origin', 'HEAD:refs/heads/main');
}

describe('discovery through a relay', () => {
  let relay: Relay;
  before(async () => {
    await t.ready;
    relay = await startRelay({ pdses: t.net.pdses.map((p) => p.url) });
    assert.equal((await alice.knotless('repo', 'create', 'early')).code, 0);
    await pushCommit('early', 'pushed-before.txt');
    const issue = await bob.knotless('issue', 'create', 'alice.test/early', '--title', 'Found before start');
    assert.equal(issue.code, 0, issue.stderr);
  });
  after(async () => {
    await relay?.close();
  });

  it('finds what was pushed before it started, and shows a push made after', async () => {
    const app = await onlyRelay(relay, ':memory:');
    try {
      await pageShows(app, '/alice.test/early', 'pushed-before.txt');
      await pageShows(app, '/alice.test/early/issues', 'Found before start');
      assert.equal((await alice.knotless('repo', 'create', 'later')).code, 0);
      await pushCommit('later', 'pushed-after.txt');
      await pageShows(app, '/alice.test/later', 'pushed-after.txt');
    } finally {
      await app.close();
    }
  });

  it('finds the same through listRepos and describeRepo when the relay lacks listReposByCollection', async () => {
    const bare = await startRelay({ pdses: t.net.pdses.map((p) => p.url), withoutByCollection: true });
    const app = await onlyRelay(bare, ':memory:');
    try {
      await pageShows(app, '/alice.test/early', 'pushed-before.txt');
      await pageShows(app, '/alice.test/early/issues', 'Found before start');
    } finally {
      await app.close();
      await bare.close();
    }
  });

  it('reads every known account again now and then: a write no stream brought shows up', async () => {
    // No stream at all: only the periodic re-reading can bring the new repository.
    const app = await appviewOn(t, ':memory:', undefined, {
      firehoses: [],
      backfillDids: [t.dids['alice.test']!],
      recheckMs: 300,
    });
    try {
      await pageShows(app, '/alice.test/early', 'pushed-before.txt');
      assert.equal((await alice.knotless('repo', 'create', 'quiet')).code, 0);
      await pushCommit('quiet', 'never-streamed.txt');
      await pageShows(app, '/alice.test/quiet', 'never-streamed.txt');
    } finally {
      await app.close();
    }
  });

  it('saves its position while only records of other applications go by', async () => {
    const dataDir = t.tmpdir();
    const app = await onlyRelay(relay, path.join(dataDir, 'index.sqlite'), dataDir);
    try {
      await app.idle();
      const service = relayStream(relay.url);
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.createRecord`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${await session()}` },
          body: JSON.stringify({
            repo: t.dids['alice.test'],
            collection: 'app.bsky.feed.post',
            record: { $type: 'app.bsky.feed.post', text: `post ${i}`, createdAt: new Date().toISOString() },
          }),
        });
        assert.equal(res.status, 200, await res.text());
      }
      const last = relay.seq;
      await waitFor('the saved position to reach the last post', async () =>
        ((await app.index.cursor(service)) ?? 0) >= last ? true : undefined,
      );
    } finally {
      await app.close();
    }
  });
});

/** An access token of alice's, for writing records of another application. */
async function session(): Promise<string> {
  const res = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ identifier: 'alice.test', password: t.password }),
  });
  return ((await res.json()) as { accessJwt: string }).accessJwt;
}

describe('a relay that forgot the position', () => {
  // Whatever runs when a step fails is closed: the PDS waits for open streams as it closes.
  const open: { close(): Promise<void> }[] = [];
  after(async () => {
    for (const o of open.reverse()) await o.close().catch(() => {});
  });
  async function closeAll(): Promise<void> {
    while (open.length > 0) await open.pop()!.close();
  }

  it('reads every account again when the relay refuses the cursor (future or outdated)', async () => {
    await t.ready;
    const dataDir = t.tmpdir();
    const database = path.join(dataDir, 'index.sqlite');
    // The first relay numbers from far ahead, so the appview's saved position is large.
    const first = await startRelay({ pdses: t.net.pdses.map((p) => p.url), firstSeq: 5_000_000 });
    open.push(first);
    const port = Number(new URL(first.url).port);
    let app = await onlyRelay(first, database, dataDir);
    open.push(app);
    assert.equal((await alice.knotless('repo', 'create', 'gap-one')).code, 0);
    await pushCommit('gap-one', 'one.txt');
    await pageShows(app, '/alice.test/gap-one', 'one.txt');
    await closeAll();

    // Restarted from 1, on the same address: the saved position is in its future. The push made
    // while the appview was down is never on its stream.
    const second = await startRelay({ pdses: t.net.pdses.map((p) => p.url), port, firstSeq: 1 });
    open.push(second);
    assert.equal((await alice.knotless('repo', 'create', 'gap-two')).code, 0);
    await pushCommit('gap-two', 'two.txt');
    app = await onlyRelay(second, database, dataDir);
    open.push(app);
    await pageShows(app, '/alice.test/gap-two', 'two.txt');
    await closeAll();

    // Pushed while neither ran; restarted numbering past the saved position, holding none of the
    // frames since: the cursor is outdated.
    assert.equal((await alice.knotless('repo', 'create', 'gap-three')).code, 0);
    await pushCommit('gap-three', 'three.txt');
    const third = await startRelay({ pdses: t.net.pdses.map((p) => p.url), port, firstSeq: 9_000_000 });
    open.push(third);
    app = await onlyRelay(third, database, dataDir);
    open.push(app);
    await pageShows(app, '/alice.test/gap-three', 'three.txt');
    await closeAll();
  });
});
