import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// A protected branch (`knotless repo protect`) is neither force-pushed nor deleted unless its
// protection allows it: git shows the reason after the ref, exits non-zero, and nothing is written.
// Directly and through the warm agent; every request goes through a counting proxy that tells the
// agent's connections apart, so that through the agent the protection is proved read by the agent.
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let socket = '';
let agent: RunningAgent | undefined;
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
  ...(agent === undefined ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: socket }),
}));
const createRepo = repoMaker(alice, 'alice.test', 'guarded');

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
});
after(() => proxy?.close());

const WRITES = new Set([
  'com.atproto.repo.putRecord',
  'com.atproto.repo.applyWrites',
  'com.atproto.repo.deleteRecord',
]);

async function tip(dir: string, branch: string): Promise<string> {
  const out = await alice.ok(dir, 'ls-remote', 'origin', `refs/heads/${branch}`);
  return out.split('\t')[0]!.trim();
}

for (const via of ['directly', 'through the agent']) {
  describe(`a protected branch, pushed to ${via}`, () => {
    before(async () => {
      if (via === 'directly') return;
      socket = path.join(t.tmpdir(), 'agent.sock');
      agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_SOCKET: socket });
    });
    after(async () => {
      await agent?.stop();
      agent = undefined;
    });

    it('refuses a force-push and a deletion, writing nothing, until the protection allows them', async () => {
      const url = await createRepo();
      const name = url.split('/').pop()!;
      const dir = await newRepo(alice, url);
      const c1 = await commitFiles(alice, dir, { 'a.txt': 'one\n' }, 'one');
      const c2 = await commitFiles(alice, dir, { 'a.txt': 'two\n' }, 'two');
      await alice.ok(dir, 'push', '-q', 'origin', 'main', 'main:side');
      for (const branch of ['main', 'side']) {
        const res = await alice.knotless('repo', 'protect', name, branch);
        assert.equal(res.code, 0, res.stderr);
      }
      // A plain fast-forward still goes.
      const c3 = await commitFiles(alice, dir, { 'a.txt': 'three\n' }, 'three');
      await alice.ok(dir, 'push', '-q', 'origin', 'main');
      await alice.ok(dir, 'reset', '-q', '--hard', c1);
      const rewrite = await commitFiles(alice, dir, { 'b.txt': 'b\n' }, 'rewrite');

      proxy!.reset();
      const forced = await alice.git(dir, 'push', '--force', 'origin', 'main');
      assert.notEqual(forced.code, 0, forced.stderr);
      assert.match(
        forced.stderr,
        /! \[remote rejected\] main -> main \(protected branch: force-push not allowed\)/,
      );
      assert.match(
        forced.stderr,
        /knotless: refs\/heads\/main is a protected branch and its protection does not allow a force-push; nothing was written to it/,
      );
      const deleted = await alice.git(dir, 'push', 'origin', ':side');
      assert.notEqual(deleted.code, 0, deleted.stderr);
      assert.match(deleted.stderr, /! \[remote rejected\] side \(protected branch: deletion not allowed\)/);
      const asked = proxy!.requests;
      assert.deepEqual(
        asked.filter((r) => WRITES.has(r.nsid ?? '')),
        [],
        'a refused push wrote',
      );
      const reads = asked.filter(
        (r) => r.nsid === 'com.atproto.repo.getRecord' && r.path.includes('dev.knotless.protection'),
      );
      assert.ok(reads.length > 0, 'the protection was not read');
      if (agent !== undefined)
        assert.ok(
          reads.every((r) => r.pid === agent!.child.pid),
          `the protection was read by another process than the agent\n${agent.log()}`,
        );
      assert.equal(await tip(dir, 'main'), c3);
      assert.equal(await tip(dir, 'side'), c2);

      const allow = await alice.knotless('repo', 'protect', name, 'main', '--allow-force-push');
      assert.equal(allow.code, 0, allow.stderr);
      await alice.ok(dir, 'push', '-q', '--force', 'origin', 'main');
      assert.equal(await tip(dir, 'main'), rewrite);
      const lift = await alice.knotless('repo', 'protect', name, 'side', '--allow-deletion');
      assert.equal(lift.code, 0, lift.stderr);
      await alice.ok(dir, 'push', '-q', 'origin', ':side');
      assert.equal(await tip(dir, 'side'), '');
    });
  });
}
