import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { agentView, agentWireView, spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { waitUntil } from './helpers/wait.ts';

// The warm agent answers git's `list for-push` from its view at once, with the commit that view is
// complete at; the push's write carries that commit as swapCommit, which proves the whole listing
// in the same request. When git sends no write (everything up to date), the helper reads once
// before exiting: a view the stream had not caught up with never ends in a false exit 0 (the
// stale cases, with the agent's stream held back: agent-stale.test.ts).
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let socket = '';
let agent: RunningAgent | undefined;
const via = () => (proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url });
const warm = useGitUser(t, 'alice.test', () => ({
  // Its repositories start on ref records (KNOTLESS_REF_TABLE=0): what the agent proves with a commit is a
  // view of ref records (a table's view is proved by the table's own CID).
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_SOCKET: socket,
  ...via(),
}));

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
  socket = path.join(t.tmpdir(), 'agent.sock');
});
after(() => proxy?.close());

let n = 0;
const q = (repo: string) => ({ did: t.dids['alice.test']!, repo, pds: t.net.pdsUrl });

/** Waits until the agent's view of `name` has main at `oid` and the commit it is at. */
async function untilAgentSees(name: string, oid: string): Promise<void> {
  await waitUntil(`the agent's view of ${name} with main at ${oid}`, async () => {
    const view = await agentWireView(socket, q(name));
    const main = view?.refs.find((r) => r.record.ref === 'refs/heads/main')?.record.target;
    return main === oid && view?.commit !== undefined ? true : undefined;
  });
}

/** A repository with main at c1 then c2 through the agent, and `side` at c1; the agent sees c2. */
async function pushedTwice(): Promise<{ name: string; url: string; dir: string; c1: string; c2: string }> {
  agent ??= await spawnAgent(socket, { ...warm.env, KNOTLESS_COMPACT: '0', ...via() });
  const name = `proof-${++n}`;
  assert.equal((await warm.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const dir = await newRepo(warm, url);
  const c1 = await commitFiles(warm, dir, { one: 'one\n' }, 'c1');
  await warm.ok(dir, 'branch', 'side');
  await warm.ok(dir, 'push', '-q', 'origin', 'main', 'main:side');
  const c2 = await commitFiles(warm, dir, { two: 'two\n' }, 'c2');
  await warm.ok(dir, 'push', '-q', 'origin', 'main');
  await untilAgentSees(name, c2);
  return { name, url, dir, c1, c2 };
}

describe('a push answered from the warm agent at once', () => {
  after(() => agent?.stop());

  it('costs one request when it writes, on the connections already open', async () => {
    const { name, dir } = await pushedTwice();
    const c3 = await commitFiles(warm, dir, { three: 'three\n' }, 'c3');
    proxy!.reset();
    const res = await warm.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    const asked = proxy!.requests.map((r) => r.nsid ?? r.path);
    assert.deepEqual(asked, ['com.atproto.repo.putRecord'], agent!.log());
    assert.equal(proxy!.connections, 0, 'a new connection was opened');
    assert.equal((await agentView(socket, q(name)))?.get('refs/heads/main')?.target, c3);
  });

  it('"Everything up-to-date" on a true view exits 0 after one read', async () => {
    const { dir } = await pushedTwice();
    proxy!.reset();
    const res = await warm.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /Everything up-to-date/);
    assert.deepEqual(
      proxy!.requests.map((r) => r.nsid),
      ['com.atproto.repo.listRecords'],
    );
  });
});
