import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { agentView, spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// git decides "up to date", deletes, prunes and leases locally from the helper's answer to
// `list for-push`, before any compare-and-swap can run. These tests let another machine rewind a
// branch, then make every one of those decisions at once, with and without a warm agent.
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let socket = '';
let agent: RunningAgent | undefined;
const via = () => (proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url });
// Pushes through its warm agent.
const warm = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_SOCKET: socket,
  ...via(),
}));
/** Set while the BlobNotFound cases run: their repositories stay on ref records (below). */
let records = false;
// No agent; asks for the ten-minute listing window that used to answer git from a cached view.
const plain = useGitUser(t, 'alice.test', () => ({
  ...(records ? { KNOTLESS_REF_TABLE: '0' } : {}),
  KNOTLESS_AGENT: '0',
  KNOTLESS_LIST_WINDOW: '600',
  KNOTLESS_COMPACT: '0',
  ...via(),
}));
// Another machine of the same account, with its own cache: it rewinds.
const other = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT: '0', KNOTLESS_COMPACT: '0' }));

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
  socket = path.join(t.tmpdir(), 'agent.sock');
});

/** Starts the warm user's agent on first use (root hooks do not wait for the user's login). */
async function ensureAgent(): Promise<void> {
  agent ??= await spawnAgent(socket, { ...warm.env, KNOTLESS_COMPACT: '0', ...via() });
}
after(() => proxy?.close());

/** Incompressible content: every push of it is a pack stored in blobs, not inline. */
const big = (): Uint8Array => crypto.randomBytes(40_000);

let n = 0;
/**
 * `user` pushes c1 then c2 to main; the other machine then force-rewinds main to c1 and creates
 * `side` at c1. `user` still has main at c2 and has never seen `side`.
 */
async function rewound(user: GitUser): Promise<{ url: string; dir: string; c1: string; c2: string }> {
  if (user === warm) await ensureAgent();
  const name = `truth-${++n}`;
  assert.equal((await user.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(user, url);
  const c1 = await commitFiles(user, dir, { one: big() }, 'c1');
  await user.ok(dir, 'push', '-q', 'origin', 'main');
  const c2 = await commitFiles(user, dir, { two: big() }, 'c2');
  await user.ok(dir, 'push', '-q', 'origin', 'main');
  const od = other.dir();
  await other.ok(od, 'clone', '-q', url, 'c');
  await other.ok(`${od}/c`, 'reset', '-q', '--hard', c1);
  await other.ok(`${od}/c`, 'push', '-q', 'origin', '+main:refs/heads/main', 'main:refs/heads/side');
  // "Warm" is a precondition, not a hope: on a loaded machine the agent's first listing or the
  // stream's delivery of the rewind can lag the pushes above.
  if (user === warm) await untilAgentSees(name, c1);
  return { url, dir, c1, c2 };
}

/**
 * Waits (bounded) until the agent has a current view of `name` whose main is `oid`, so that the
 * next push through it is answered from that view.
 */
async function untilAgentSees(name: string, oid: string): Promise<void> {
  const q = { did: t.dids['alice.test']!, repo: name, pds: t.net.pdsUrl };
  let main: string | undefined;
  for (let i = 0; i < 300; i++) {
    main = (await agentView(socket, q))?.get('refs/heads/main')?.target;
    if (main === oid) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(main, oid, "the agent's view of main");
}

/** The remote's refs as the other machine lists them: ref → oid. */
async function remote(url: string): Promise<Map<string, string>> {
  const out = await other.ok(other.dir(), 'ls-remote', url);
  return new Map(
    out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => [l.split('\t')[1]!, l.split('\t')[0]!]),
  );
}

describe('list for-push', () => {
  // Before the network's own `after`: the PDS waits for open event streams when it closes.
  after(() => agent?.stop());

  for (const [label, user] of [
    ['without an agent', plain],
    ['through the agent', warm],
  ] as const) {
    describe(`git decides on a true listing after another machine's rewind (${label})`, () => {
      it('"up to date": the push of main lands c2 again', async () => {
        const { url, dir, c2 } = await rewound(user);
        proxy!.reset();
        const res = await user.git(dir, 'push', 'origin', 'main');
        assert.equal(res.code, 0, res.stderr);
        assert.doesNotMatch(res.stderr, /Everything up-to-date/);
        assert.equal((await remote(url)).get('refs/heads/main'), c2);
        // c2's pack goes up again as blobs (uploadBlob), which says nothing of the listing.
        const asked = proxy!.requests.map((r) => r.nsid).filter((x) => x !== 'com.atproto.repo.uploadBlob');
        if (user === warm) {
          // The agent answered from its view (the rewind applied from the stream) at once, and the
          // write proved it (swapCommit): one request.
          assert.deepEqual(asked, ['com.atproto.repo.putRecord']);
        } else assert.equal(asked[0], 'com.atproto.repo.listRecords');
      });

      it('a delete of a ref git had not seen is made, not refused as missing', async () => {
        const { url, dir } = await rewound(user);
        const res = await user.git(dir, 'push', 'origin', ':side');
        assert.equal(res.code, 0, res.stderr);
        assert.equal((await remote(url)).has('refs/heads/side'), false);
      });

      it('--prune pushes main and prunes side', async () => {
        const { url, dir, c2 } = await rewound(user);
        const res = await user.git(dir, 'push', '--prune', 'origin', 'refs/heads/*:refs/heads/*');
        assert.equal(res.code, 0, res.stderr);
        const refs = await remote(url);
        assert.equal(refs.get('refs/heads/main'), c2);
        assert.equal(refs.has('refs/heads/side'), false);
      });

      it('--force-with-lease is checked against the rewound value and refused', async () => {
        const { url, dir, c1 } = await rewound(user);
        const res = await user.git(dir, 'push', '--force-with-lease', 'origin', 'main');
        assert.notEqual(res.code, 0, res.stderr);
        assert.match(res.stderr, /stale info/);
        assert.equal((await remote(url)).get('refs/heads/main'), c1);
      });

      it('--atomic with --tags pushes main with the tag', async () => {
        const { url, dir, c2 } = await rewound(user);
        await user.ok(dir, 'tag', 'v1');
        const res = await user.git(dir, 'push', '--atomic', 'origin', 'main', '--tags');
        assert.equal(res.code, 0, res.stderr);
        const refs = await remote(url);
        assert.equal(refs.get('refs/heads/main'), c2);
        assert.equal(refs.get('refs/tags/v1'), c2);
      });

      it('--mirror makes the remote what this repository is', async () => {
        const { url, dir, c2 } = await rewound(user);
        const res = await user.git(dir, 'push', '--mirror', 'origin');
        assert.equal(res.code, 0, res.stderr);
        const refs = await remote(url);
        assert.equal(refs.get('refs/heads/main'), c2);
        assert.equal(refs.has('refs/heads/side'), false);
      });
    });
  }

  describe('the agent with packs in blobs', () => {
    /** The PDS requests `run` made (the agent's included), as NSIDs. */
    async function requestsOf(run: () => Promise<unknown>): Promise<string[]> {
      proxy!.reset();
      await run();
      return proxy!.requests.map((r) => r.nsid ?? r.path);
    }
    const q = (repo: string) => ({ did: t.dids['alice.test']!, repo, pds: t.net.pdsUrl });

    it("applies another machine's push and compaction from the event stream: no listing, no conflict", async () => {
      await ensureAgent();
      const name = `blobs-${++n}`;
      assert.equal((await warm.knotless('repo', 'create', name)).code, 0);
      const url = `knotless://alice.test/${name}`;
      const dir = await newRepo(warm, url);
      for (let i = 0; i < 3; i++) {
        await commitFiles(warm, dir, { [`w${i}`]: big() }, `warm ${i}`);
        await warm.ok(dir, 'push', '-q', 'origin', 'main');
      }
      // Another machine pushes a commit whose pack is stored in blobs.
      const od = other.dir();
      await other.ok(od, 'clone', '-q', url, 'c');
      const theirs = await commitFiles(other, `${od}/c`, { o: big() }, 'from another machine');
      await other.ok(`${od}/c`, 'push', '-q', 'origin', 'main');
      await warm.ok(dir, 'pull', '-q', '--ff-only', 'origin', 'main');
      assert.equal((await warm.ok(dir, 'rev-parse', 'HEAD')).trim(), theirs);
      await untilAgentSees(name, theirs);
      await commitFiles(warm, dir, { w: 'small' }, 'on top');
      // The view followed the event: the write alone, its swapCommit proving the view.
      assert.deepEqual(await requestsOf(() => warm.ok(dir, 'push', '-q', 'origin', 'main')), [
        'com.atproto.repo.putRecord',
      ]);

      // A compaction elsewhere rewrites main's packs: the agent's view takes the new list.
      const compacted = await other.knotless('repo', 'compact', name);
      assert.equal(compacted.code, 0, compacted.stderr);
      assert.match(compacted.stderr, /packs →/);
      await commitFiles(warm, dir, { w: 'after compaction' }, 'after compaction');
      // One of three, by when the compaction's event reaches the agent, and never a listing of ref
      // records: the view has taken it (the write alone, swapped on the view's table); the stream had
      // not delivered it (the write's swap on the table refused, the table alone read again with its
      // proof, the write that lands); or the view was taking it just then and was not served (the
      // table read with its proof, then the write). The write that lands is swapped on the table
      // read, which proves the whole listing git was given, so nothing is read after it; the view
      // is not dropped (below).
      const asked = await requestsOf(() => warm.ok(dir, 'push', '-q', 'origin', 'main'));
      const put = 'com.atproto.repo.putRecord';
      const reread = 'com.atproto.sync.getRecord';
      assert.ok(
        [[put], [put, reread, put], [reread, put]].some((seq) => isDeepStrictEqual(seq, asked)),
        asked.join(' '),
      );
      const view = await agentView(socket, q(name));
      assert.ok(view !== null, 'the agent has a current view');
      assert.equal(view.get('refs/heads/main')?.target, (await remote(url)).get('refs/heads/main'));
      assert.doesNotMatch(agent!.log(), new RegExp(`dropped the view of [^ ]*/${name}:`));
    });

    it('drops its view and says so once when an event cannot be applied; the next push lists', async () => {
      await ensureAgent();
      const name = `bad-${++n}`;
      assert.equal((await warm.knotless('repo', 'create', name)).code, 0);
      const url = `knotless://alice.test/${name}`;
      const dir = await newRepo(warm, url);
      await commitFiles(warm, dir, { a: '1' }, 'one');
      await warm.ok(dir, 'push', '-q', 'origin', 'main');
      for (let i = 0; i < 300 && (await agentView(socket, q(name))) === null; i++)
        await new Promise((r) => setTimeout(r, 200));
      assert.notEqual(await agentView(socket, q(name)), null, 'the agent has a view');
      // A record under this repository's keys that no listing would keep (its target is no object id).
      const session = (await (
        await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.server.createSession`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ identifier: 'alice.test', password: t.password }),
        })
      ).json()) as { accessJwt: string };
      const put = await fetch(`${t.net.pdsUrl}/xrpc/com.atproto.repo.putRecord`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessJwt}` },
        body: JSON.stringify({
          repo: t.dids['alice.test'],
          collection: 'dev.knotless.ref',
          rkey: `${name}~bad`,
          record: {
            $type: 'dev.knotless.ref',
            repo: name,
            ref: 'refs/heads/bad',
            target: 'not-an-id',
            packs: [],
            updatedAt: new Date().toISOString(),
          },
        }),
      });
      assert.equal(put.status, 200, await put.text());
      const dropped = new RegExp(`dropped the view of [^ ]+/${name}: an event could not be applied`, 'g');
      for (let i = 0; i < 300 && !dropped.test(agent!.log()); i++)
        await new Promise((r) => setTimeout(r, 200));
      assert.equal(agent!.log().match(dropped)?.length, 1, agent!.log());
      await commitFiles(warm, dir, { a: '2' }, 'two');
      const requests = await requestsOf(() => warm.ok(dir, 'push', '-q', 'origin', 'main'));
      // The helper lists for itself (the agent starts a view again beside it).
      assert.ok(requests.includes('com.atproto.repo.listRecords'), requests.join());
      assert.equal(
        (await remote(url)).get('refs/heads/main'),
        (await warm.ok(dir, 'rev-parse', 'HEAD')).trim(),
      );
    });

    it('drops every view of a PDS when its event stream is cut, and answers again once re-listed', async () => {
      await ensureAgent();
      // A TCP relay in front of the PDS whose connections the test can cut; the agent follows the
      // PDS named in the question, so asking with the relay's address puts its stream through it.
      const sockets = new Set<net.Socket>();
      const relay = net.createServer((client) => {
        const upstream = net.connect(Number(new URL(t.net.pdsUrl).port), '127.0.0.1');
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => s.destroy());
        }
        client.pipe(upstream).pipe(client);
      });
      await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
      const pds = `http://127.0.0.1:${(relay.address() as net.AddressInfo).port}`;
      try {
        const name = `cut-${++n}`;
        assert.equal((await warm.knotless('repo', 'create', name)).code, 0);
        const url = `knotless://alice.test/${name}`;
        const dir = await newRepo(other, url);
        const view = () => agentView(socket, { ...q(name), pds });
        assert.equal(await view(), null);
        // Until a message arrives the stream is not known to be live: push until one has.
        const pushedAndSeen = async (round: string): Promise<void> => {
          for (let i = 0; i < 20; i++) {
            await commitFiles(other, dir, { a: `${round} ${i}` }, `${round} ${i}`);
            await other.ok(dir, 'push', '-q', 'origin', 'main');
            const head = (await other.ok(dir, 'rev-parse', 'HEAD')).trim();
            for (let j = 0; j < 5; j++) {
              if ((await view())?.get('refs/heads/main')?.target === head) return;
              await new Promise((r) => setTimeout(r, 200));
            }
          }
          assert.fail(`the agent never had a current view (${round})`);
        };
        await pushedAndSeen('before');
        for (const s of sockets) s.destroy();
        const cut = new RegExp(`dropped the view of [^ ]+/${name}: the event stream was cut`);
        for (let i = 0; i < 300 && !cut.test(agent!.log()); i++) await new Promise((r) => setTimeout(r, 100));
        assert.match(agent!.log(), cut);
        assert.equal(await view(), null);
        // The stream reconnects; once live again, the view is listed afresh and answers.
        await pushedAndSeen('after');
      } finally {
        for (const s of sockets) s.destroy();
        await new Promise((r) => relay.close(r));
      }
    });

    it('a new branch after a rewind and a compaction elsewhere builds on packs that exist', async () => {
      await ensureAgent();
      const { url, dir, c1, c2 } = await rewound(warm);
      const c3 = await commitFiles(warm, dir, { three: big() }, 'c3');
      const compacted = await other.knotless('repo', 'compact', url.split('/').pop()!);
      assert.equal(compacted.code, 0, compacted.stderr);
      const res = await warm.git(dir, 'push', 'origin', 'main:refs/heads/topic');
      assert.equal(res.code, 0, res.stderr);
      // A compaction moves packs, not values: nothing git judged changed.
      assert.doesNotMatch(res.stderr, /changed while git was deciding/);
      const refs = await remote(url);
      assert.equal(refs.get('refs/heads/topic'), c3);
      assert.equal(refs.get('refs/heads/main'), c1);
      // Everything topic needs can be fetched from what the PDS holds.
      const od = other.dir();
      await other.ok(od, 'clone', '-q', '--branch', 'topic', url, 'c');
      await other.ok(`${od}/c`, 'fsck', '--strict');
      assert.equal((await other.ok(`${od}/c`, 'rev-parse', 'HEAD~1')).trim(), c2);
    });
  });

  describe('a write refused with BlobNotFound', () => {
    // Ref records' per-ref rebuild, whose requests performance.md states ("A push that the PDS
    // refuses with BlobNotFound"): these repositories are made and pushed with KNOTLESS_REF_TABLE=0.
    before(() => {
      records = true;
    });
    after(() => {
      records = false;
    });
    /** A repository where `plain` pushed c1 and has committed c2 on top, not pushed yet. */
    async function ahead(): Promise<{ url: string; dir: string; c1: string; c2: string }> {
      const name = `gone-${++n}`;
      assert.equal((await plain.knotless('repo', 'create', name)).code, 0);
      const url = `knotless://alice.test/${name}`;
      const dir = await newRepo(plain, url);
      const c1 = await commitFiles(plain, dir, { one: big() }, 'c1');
      await plain.ok(dir, 'push', '-q', 'origin', 'main');
      const c2 = await commitFiles(plain, dir, { two: big() }, 'c2');
      return { url, dir, c1, c2 };
    }

    it('re-reads the refs, rebuilds its packs once and lands', async () => {
      const { url, dir, c2 } = await ahead();
      proxy!.reset();
      proxy!.inject({
        nsid: 'com.atproto.repo.putRecord',
        fault: { kind: 'status', status: 400, error: 'BlobNotFound' },
      });
      const res = await plain.git(dir, 'push', 'origin', 'main');
      proxy!.clearFaults();
      assert.equal(res.code, 0, res.stderr);
      const seen = proxy!.requests.map((r) => r.nsid);
      // The cold listing reads the proof that there is no ref table beside it, and the push once
      // more after its writes (a table a migration may have made meanwhile); the re-read is proved
      // whole as the first listing was (a proof at the account's newest commit). Each proved listing
      // reads the proofs of the ends of the repository's keys its proof's path does not hold (none
      // to two), and builds the nodes within them from the listing.
      const proofs = seen.filter((n) => n === 'com.atproto.sync.getRecord').length;
      assert.ok(proofs >= 3 && proofs <= 7, `${proofs} proofs`);
      assert.equal(seen.at(-1), 'com.atproto.sync.getRecord');
      assert.deepEqual(
        seen.filter((n) => n !== 'com.atproto.sync.getRecord' && n !== 'com.atproto.sync.getBlocks'),
        // The rebuilt pack list is uploaded again: packs of this size are stored in blobs.
        [
          'com.atproto.repo.listRecords',
          'com.atproto.repo.uploadBlob',
          'com.atproto.repo.putRecord',
          'com.atproto.repo.listRecords',
          'com.atproto.repo.uploadBlob',
          'com.atproto.repo.putRecord',
        ],
      );
      assert.equal((await remote(url)).get('refs/heads/main'), c2);
    });

    it('says so in one sentence when the second attempt is refused too', async () => {
      const { url, dir, c1 } = await ahead();
      proxy!.inject({
        nsid: 'com.atproto.repo.putRecord',
        times: 2,
        fault: { kind: 'status', status: 400, error: 'BlobNotFound' },
      });
      const res = await plain.git(dir, 'push', 'origin', 'main');
      proxy!.clearFaults();
      assert.notEqual(res.code, 0);
      assert.equal(res.stderr.match(/^knotless: /gm)?.length, 1, res.stderr);
      assert.match(res.stderr, /packs it builds on were removed meanwhile/);
      assert.equal((await remote(url)).get('refs/heads/main'), c1);
    });
  });
});
