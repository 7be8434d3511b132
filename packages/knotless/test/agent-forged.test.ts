// The warm agent takes nothing from an event-stream commit it has not checked (format.md, "Verified";
// agent/commit-check.ts): the commit's signature against the account's key, and its operations
// against its blocks and the tree the previous commit signed (prevData). Here the agent's stream
// runs through a relay that forges one commit of another machine's push: a ref change left out of
// its operations, a ref change pointing at another block, or the commit's signature altered. The
// agent's view takes none of it (the view is dropped, with one line in its log), and the next warm
// listing, carried by the agent, shows the branch where the other machine put it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import crypto from 'node:crypto';
import { decodeAll, encode } from '@atproto/lex-cbor';
import { CID } from 'multiformats/cid';
import { create as createDigest } from 'multiformats/hashes/digest';
import { varint } from 'multiformats';
import { startProxy, type Proxy } from 'knotless-devnet';
import { agentWireView, spawnAgent, startGate, type Gate, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test']);
let gate: Gate | undefined;
let proxy: Proxy | undefined;
let agent: RunningAgent | undefined;
let own = '';
// Its requests go through a proxy that tells the agent's apart; its identity cache names the relay
// as alice's PDS, so the agent's stream runs through the relay (as in agent-stale.test.ts).
// Both machines keep new repositories on ref records (the stream's ref-record operations are what
// most cases forge; the table case writes its table by hand from them, as a migration would).
const warm = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_SOCKET: own,
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));
// Another machine of the same account, with its own cache and no agent.
const other = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_AGENT: '0',
  KNOTLESS_COMPACT: '0',
}));
const did = () => t.dids['alice.test']!;

type Body = Record<string, unknown> & { ops: Array<Record<string, unknown>> };
/** The forgery armed for the next commit of alice that changes a ref; undefined once it fired. */
let forge: ((body: Body) => Body) | undefined;
let fired = 0;

/** The relay's rewrite of one event (a header and a body, DAG-CBOR), as it passes. */
function alter(payload: Buffer): Buffer {
  const [header, body] = [...decodeAll(payload)] as [Record<string, unknown>, Body];
  if (forge === undefined || header['t'] !== '#commit' || body.repo !== did()) return payload;
  if (!body.ops.some(isRefOp) && !body.ops.some(isTableOp)) return payload;
  const out = forge(body);
  forge = undefined;
  fired++;
  return Buffer.concat([encode(header as never), encode(out as never)]);
}

const isRefOp = (o: Record<string, unknown>): boolean => String(o['path']).startsWith('dev.knotless.ref/');
const isTableOp = (o: Record<string, unknown>): boolean => String(o['path']).startsWith('dev.knotless.refs/');

before(async () => {
  await t.ready;
  gate = await startGate(t.net.pdsUrl, alter);
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
  own = path.join(t.tmpdir(), 'agent.sock');
});
after(async () => {
  await gate?.close();
  await proxy?.close();
});

/** Points the warm user's identity cache at the relay as alice's PDS (as agent-stale.test.ts does). */
function pointAtGate(): void {
  const file = path.join(warm.env['KNOTLESS_CACHE_DIR']!, 'identity.json');
  const cache = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    dids: Record<string, { value: { pds: string } }>;
  };
  cache.dids[did()]!.value.pds = gate!.url;
  fs.writeFileSync(file, JSON.stringify(cache));
}

/** A CAR's root and blocks, read as they are (the relay's rewrite runs synchronously). */
function readCar(buf: Uint8Array): { root: CID; blocks: Array<[CID, Uint8Array]> } {
  const [headerLength, a] = varint.decode(buf);
  const header = [...decodeAll(buf.subarray(a, a + headerLength))][0] as { roots: unknown[] };
  const blocks: Array<[CID, Uint8Array]> = [];
  for (let at = a + headerLength; at < buf.length;) {
    const [length, read] = varint.decode(buf, at);
    const [cid, data] = CID.decodeFirst(buf.subarray(at + read, at + read + length));
    blocks.push([cid, data]);
    at += read + length;
  }
  return { root: CID.asCID(header.roots[0])!, blocks };
}

function writeCar(root: CID, blocks: Array<[CID, Uint8Array]>): Uint8Array {
  const parts: Uint8Array[] = [];
  const header = encode({ version: 1, roots: [root] } as never);
  parts.push(varint.encodeTo(header.length, new Uint8Array(varint.encodingLength(header.length))), header);
  for (const [cid, data] of blocks) {
    const length = cid.bytes.length + data.length;
    parts.push(varint.encodeTo(length, new Uint8Array(varint.encodingLength(length))), cid.bytes, data);
  }
  return Buffer.concat(parts);
}

const FORGERIES: Record<string, (body: Body) => Body> = {
  'a ref change left out of its operations': (body) => ({
    ...body,
    ops: body.ops.filter((o) => !isRefOp(o)),
  }),
  'a ref change pointing at another block': (body) => ({
    ...body,
    // The commit's own CID: a block the event carries, and not the record.
    ops: body.ops.map((o) => (isRefOp(o) && o['cid'] !== null ? { ...o, cid: body['commit'] } : o)),
  }),
  'its signature altered': (body) => {
    const car = readCar(body['blocks'] as Uint8Array);
    const commitBlock = car.blocks.find(([cid]) => cid.equals(car.root))![1];
    const commit = [...decodeAll(commitBlock)][0] as { sig: Uint8Array };
    const sig = Uint8Array.from(commit.sig);
    sig[10] = sig[10]! ^ 1;
    const bytes = encode({ ...commit, sig } as never);
    const root = CID.createV1(0x71, createDigest(0x12, crypto.createHash('sha256').update(bytes).digest()));
    const blocks = car.blocks.map(([cid, data]): [CID, Uint8Array] =>
      cid.equals(car.root) ? [root, bytes] : [cid, data],
    );
    return { ...body, commit: root, blocks: writeCar(root, blocks) };
  },
};

let n = 0;
describe('the warm agent and a forged event stream', () => {
  // Before the network's own `after`: the PDS waits for open event streams when it closes.
  after(async () => {
    await agent?.stop();
    agent = undefined;
  });
  before(async () => {
    assert.equal((await warm.knotless('repo', 'list')).code, 0);
    pointAtGate();
    agent = await spawnAgent(own, {
      ...warm.env,
      KNOTLESS_AGENT_SOCKET: own,
      KNOTLESS_COMPACT: '0',
      KNOTLESS_SERVICE: proxy!.url,
    });
  });

  for (const [what, forgery] of Object.entries(FORGERIES)) {
    it(`takes nothing from a commit with ${what}`, async () => {
      const name = `forged-${++n}`;
      const made = await warm.knotless('repo', 'create', name);
      assert.equal(made.code, 0, made.stderr);
      const url = `knotless://${did()}/${name}`;
      pointAtGate();
      const dir = await newRepo(warm, url);
      const c1 = await commitFiles(warm, dir, { one: 'one\n' }, 'c1');
      await warm.ok(dir, 'push', '-q', 'origin', 'main');
      const q = { did: did(), repo: name, pds: gate!.url };
      // The agent has a view of the repository at c1 (bounded only by the test runner's limit).
      for (;;) {
        const view = await agentWireView(own, q);
        if (view?.commit !== undefined && view.refs.some((r) => r.record.target === c1)) break;
        await new Promise((r) => setTimeout(r, 200));
      }

      // The other machine moves main; its commit reaches the agent forged.
      const od = other.dir();
      await other.ok(od, 'clone', '-q', url, 'c');
      const c2 = await commitFiles(other, `${od}/c`, { two: 'two\n' }, 'c2');
      forge = forgery;
      const before = fired;
      await other.ok(`${od}/c`, 'push', '-q', 'origin', 'main');
      while (fired === before) await new Promise((r) => setTimeout(r, 100));

      // Nothing of it was applied: the view was dropped, with one line saying why.
      const line = new RegExp(`dropped the view of ${did()}/${name}: an event could not be applied \\(`);
      while (!line.test(agent!.log())) await new Promise((r) => setTimeout(r, 100));
      assert.equal(
        agent!
          .log()
          .split('\n')
          .filter((l) => line.test(l)).length,
        1,
        agent!.log(),
      );
      const view = await agentWireView(own, q);
      assert.ok(
        view === null || !view.refs.some((r) => r.record.target === c2),
        'the forged change was applied',
      );

      // The next warm listing, carried by the agent, reads the account afresh and is right.
      proxy!.reset();
      pointAtGate();
      const listed = await warm.git(dir, 'ls-remote', 'origin', 'refs/heads/main');
      assert.equal(listed.stdout, `${c2}\trefs/heads/main\n`, listed.stderr);
      assert.ok(proxy!.requests.length > 0);
      assert.ok(
        proxy!.requests.every((r) => r.pid === agent!.child.pid),
        `the agent did not carry the listing: ${JSON.stringify(proxy!.requests.map((r) => [r.nsid, r.pid, r.connection]))} (agent ${agent!.child.pid}); ${listed.stderr}`,
      );
    });
  }

  it("takes nothing from a commit of a repository's ref table whose signature was altered", async () => {
    const name = `forged-table-${++n}`;
    assert.equal((await warm.knotless('repo', 'create', name)).code, 0);
    const url = `knotless://${did()}/${name}`;
    pointAtGate();
    const dir = await newRepo(warm, url);
    const c1 = await commitFiles(warm, dir, { one: 'one\n' }, 'c1');
    await warm.ok(dir, 'push', '-q', 'origin', 'main');
    const { refRecords, writeTable } = tableHands(t, 'alice.test');
    const main = (await refRecords(name)).get('refs/heads/main')!;
    await writeTable(name, [{ ref: 'refs/heads/main', target: c1, packs: main.packs }]);
    const q = new URLSearchParams({ did: did(), repo: name, pds: gate!.url });
    const tableView = async () => {
      const body = await new Promise<string>((resolve, reject) => {
        http
          .get({ socketPath: own, path: `/view?${q.toString()}` }, (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (d: string) => (text += d));
            res.on('end', () => resolve(text));
          })
          .on('error', reject);
      });
      const v = JSON.parse(body) as { table?: { value: { refs: Array<{ target?: string }> } } };
      return v.table;
    };
    // The agent's view is the table, with main at c1 (bounded only by the test runner's limit).
    while (!((await tableView())?.value.refs.some((r) => r.target === c1) ?? false))
      await new Promise((r) => setTimeout(r, 200));

    // The other machine moves main, writing the table; its commit reaches the agent forged.
    const od = other.dir();
    await other.ok(od, 'clone', '-q', url, 'c');
    const c2 = await commitFiles(other, `${od}/c`, { two: 'two\n' }, 'c2');
    forge = FORGERIES['its signature altered'];
    const before = fired;
    await other.ok(`${od}/c`, 'push', '-q', 'origin', 'main');
    while (fired === before) await new Promise((r) => setTimeout(r, 100));
    const line = new RegExp(`dropped the view of ${did()}/${name}: an event could not be applied \\(`);
    while (!line.test(agent!.log())) await new Promise((r) => setTimeout(r, 100));
    proxy!.reset();
    const seen = await tableView();
    assert.ok(!(seen?.value.refs.some((r) => r.target === c2) ?? false), 'the forged table was taken');

    // The next request reads the table afresh, with its proof, carried by the agent: the view it
    // loads is the table the other machine wrote.
    while (!((await tableView())?.value.refs.some((r) => r.target === c2) ?? false))
      await new Promise((r) => setTimeout(r, 200));
    assert.ok(proxy!.count('com.atproto.sync.getRecord') >= 1, JSON.stringify(proxy!.requests));
    assert.ok(
      proxy!.requests.every((r) => r.pid === agent!.child.pid),
      'the agent did not read the table',
    );

    // A warm push on that view is one write.
    await warm.ok(dir, 'pull', '-q', '--no-rebase', 'origin', 'main');
    const c3 = await commitFiles(warm, dir, { three: 'three\n' }, 'c3');
    proxy!.reset();
    pointAtGate();
    await warm.ok(dir, 'push', '-q', 'origin', 'main');
    assert.deepEqual(
      proxy!.requests.map((r) => [r.nsid, r.pid]),
      [['com.atproto.repo.putRecord', agent!.child.pid]],
    );
    const ls = await other.ok(other.dir(), 'ls-remote', url, 'refs/heads/main');
    assert.equal(ls, `${c3}\trefs/heads/main\n`);
  });
});
