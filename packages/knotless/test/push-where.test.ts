import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, refsOf, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { packCount } from './helpers/ref-packs.ts';

// The helper takes the repository from GIT_DIR, as git hands it over, and asks git for the object
// directory only when a push folds packs: pushes from a linked worktree (whose objects are in the
// main repository's directory), from a subdirectory and with `git -C`, many in a row so that folds
// happen, land whole, both directly and through the agent.
// Every push goes through a counting proxy that tells the agent's connections apart: through the
// agent, each push's write must have come from the agent.
const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let socket = '';
let agent: RunningAgent | undefined;
let objectsEnv: Record<string, string> = {};
const alice = useGitUser(t, 'alice.test', () => ({
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
  ...(agent === undefined ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: socket }),
  ...objectsEnv,
}));
const createRepo = repoMaker(alice, 'alice.test', 'where');

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl, watchPids: () => (agent ? [agent.child.pid!] : []) });
});
after(() => proxy?.close());

const packsOf = (url: string, ref: string) => packCount(t, 'alice.test', url, ref);
const WRITES = new Set(['com.atproto.repo.putRecord', 'com.atproto.repo.applyWrites']);

/**
 * Runs `push` (one git push) and checks who wrote its record: through the agent, the agent (a
 * detached compaction may write beside it); directly, never the agent.
 */
async function pushed(push: () => Promise<unknown>): Promise<void> {
  proxy!.reset();
  await push();
  const writes = proxy!.requests.filter((r) => WRITES.has(r.nsid ?? ''));
  assert.ok(writes.length > 0, 'the push wrote nothing');
  const byAgent = writes.filter((r) => agent !== undefined && r.pid === agent.child.pid).length;
  if (agent === undefined) assert.equal(byAgent, 0);
  else assert.ok(byAgent > 0, `none of the push's ${writes.length} writes came from the agent`);
}

for (const via of ['directly', 'through the agent']) {
  describe(`pushes ${via}`, () => {
    before(async () => {
      if (via === 'directly') return;
      socket = path.join(t.tmpdir(), 'agent.sock');
      agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_SOCKET: socket });
    });
    // Before the network's own `after`: the PDS waits for open event streams when it closes.
    after(async () => {
      await agent?.stop();
      agent = undefined;
    });

    it('from a linked worktree, a subdirectory and git -C land whole, folds included', async () => {
      const url = await createRepo();
      const main = await newRepo(alice, url);
      await commitFiles(alice, main, { 'a.txt': 'one\n' }, 'one');
      await alice.ok(main, 'push', '-q', 'origin', 'main');
      const tree = path.join(alice.dir(), 'wt');
      await alice.ok(main, 'worktree', 'add', '-q', '-b', 'feature', tree);
      fs.mkdirSync(path.join(tree, 'sub'));
      for (let i = 0; i < 6; i++) {
        await commitFiles(alice, tree, { [`sub/f${i}.txt`]: `change ${i}\n`.repeat(50) }, `feature ${i}`);
        // In turn: the worktree's top, a subdirectory of it, and git -C from elsewhere.
        if (i % 3 === 0) await pushed(() => alice.ok(tree, 'push', '-q', 'origin', 'feature'));
        else if (i % 3 === 1)
          await pushed(() => alice.ok(path.join(tree, 'sub'), 'push', '-q', 'origin', 'feature'));
        else await pushed(() => alice.ok(alice.dir(), '-C', tree, 'push', '-q', 'origin', 'feature'));
        await commitFiles(alice, main, { 'a.txt': `main ${i}\n` }, `main ${i}`);
        await pushed(() => alice.ok(main, 'push', '-q', 'origin', 'main'));
      }
      const clone = path.join(alice.dir(), 'clone');
      await alice.ok(alice.dir(), 'clone', '-q', '--mirror', url, clone);
      await alice.ok(clone, 'fsck', '--strict', '--no-dangling');
      const ours = (await refsOf(alice, main, 'refs/heads/')).trim();
      assert.equal((await refsOf(alice, clone, 'refs/heads/')).trim(), ours);
      // Folds happened: seven pushes of the branch left fewer packs on its record than pushes (a
      // fold that could not find the objects leaves the list as it was, one pack per push).
      assert.ok((await packsOf(url, 'refs/heads/feature')) < 7);
    });

    it('from a repository whose objects GIT_OBJECT_DIRECTORY keeps elsewhere: folds, and adds nothing there', async () => {
      const url = await createRepo();
      const main = await newRepo(alice, url);
      const elsewhere = path.join(alice.dir(), `objects-${via === 'directly' ? 0 : 1}`);
      fs.renameSync(path.join(main, '.git', 'objects'), elsewhere);
      objectsEnv = { GIT_OBJECT_DIRECTORY: elsewhere };
      const packsThere = () => fs.readdirSync(path.join(elsewhere, 'pack')).sort();
      try {
        for (let i = 0; i < 6; i++) {
          await commitFiles(alice, main, { [`f${i}.txt`]: `change ${i}\n`.repeat(50) }, `change ${i}`);
          const held = packsThere();
          await pushed(() => alice.ok(main, 'push', '-q', 'origin', 'main'));
          // The fold's scratch packs went to the scratch repository, not into the user's objects.
          assert.deepEqual(packsThere(), held);
        }
        assert.ok((await packsOf(url, 'refs/heads/main')) < 6);
      } finally {
        objectsEnv = {};
      }
      const clone = path.join(alice.dir(), `clone-objects-${via === 'directly' ? 0 : 1}`);
      await alice.ok(alice.dir(), 'clone', '-q', '--mirror', url, clone);
      await alice.ok(clone, 'fsck', '--strict', '--no-dangling');
    });
  });
}
