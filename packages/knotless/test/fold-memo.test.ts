import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { spawnAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, refsOf, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { packCount } from './helpers/ref-packs.ts';

// Each push without the agent is a new helper process. A fold packs again the objects of the inline
// packs it merges; the packs earlier pushes made are known from the cache folder, so the fold indexes
// none of them (no index-pack). With that folder gone or damaged, the fold indexes them as before and
// every push still lands whole. Real git, the real PDS; git's trace tells which git commands ran.
const t = useNetwork(['alice.test']);
let trace = '';
let agentEnv: Record<string, string> = { KNOTLESS_AGENT: '0' };
const alice = useGitUser(t, 'alice.test', () => ({ ...agentEnv, GIT_TRACE: trace }));

const createRepo = repoMaker(alice, 'alice.test', 'memo');

/** The git commands one push ran (their names), from git's trace. */
async function pushTraced(cwd: string, ref: string): Promise<string[]> {
  const file = path.join(alice.dir(), 'trace');
  trace = file;
  try {
    await alice.ok(cwd, 'push', '-q', 'origin', ref);
  } finally {
    trace = '';
  }
  const text = fs.readFileSync(file, 'utf8');
  return [...text.matchAll(/trace: built-in: git ([a-z-]+)/g)].map((m) => m[1]!).slice(1);
}

const packsOf = (url: string, ref: string) => packCount(t, 'alice.test', url, ref);

/** A clone of `url` is whole and has `main`'s refs. */
async function clonesWhole(url: string, main: string): Promise<void> {
  const clone = path.join(alice.dir(), 'clone');
  await alice.ok(alice.dir(), 'clone', '-q', '--mirror', url, clone);
  await alice.ok(clone, 'fsck', '--strict', '--no-dangling');
  assert.equal(
    (await refsOf(alice, clone, 'refs/heads/')).trim(),
    (await refsOf(alice, main, 'refs/heads/')).trim(),
  );
}

const memo = () => path.join(alice.env['KNOTLESS_CACHE_DIR']!, 'pack-objects');

describe('a fold in a new helper process', () => {
  it('indexes none of the packs earlier pushes made: they are known from the cache folder', async () => {
    const url = await createRepo();
    const main = await newRepo(alice, url);
    const runs: string[][] = [];
    for (let i = 0; i < 8; i++) {
      await commitFiles(alice, main, { [`f${i}.txt`]: `change ${i}\n`.repeat(20) }, `change ${i}`);
      runs.push(await pushTraced(main, 'main'));
    }
    // Folds happened (a second pack-objects, the merged pack), and no push indexed a pack.
    assert.ok(
      runs.filter((r) => r.filter((c) => c === 'pack-objects').length === 2).length >= 3,
      JSON.stringify(runs),
    );
    assert.deepEqual(
      runs.filter((r) => r.includes('index-pack')),
      [],
    );
    assert.ok((await packsOf(url, 'refs/heads/main')) < 8);
    await clonesWhole(url, main);
  });

  it('with the folder deleted or its lists damaged, indexes the packs and lands whole', async () => {
    const url = await createRepo();
    const main = await newRepo(alice, url);
    let indexed = 0;
    for (let i = 0; i < 8; i++) {
      // Every other push, the kept lists are damaged (cut short), or the folder removed.
      if (i % 2 === 1 && fs.existsSync(memo())) {
        if (i % 4 === 1) fs.rmSync(memo(), { recursive: true });
        else
          for (const name of fs.readdirSync(memo())) {
            const file = path.join(memo(), name);
            fs.writeFileSync(file, fs.readFileSync(file, 'utf8').split('\n').slice(1).join('\n'));
          }
      }
      await commitFiles(alice, main, { [`f${i}.txt`]: `change ${i}\n`.repeat(20) }, `change ${i}`);
      const run = await pushTraced(main, 'main');
      if (run.includes('index-pack')) indexed++;
    }
    // The folds that met an unknown pack indexed it (and so the lists came back).
    assert.ok(indexed >= 1);
    assert.ok((await packsOf(url, 'refs/heads/main')) < 8);
    await clonesWhole(url, main);
  });

  it('is not needed for a new branch at a pushed commit: no pack is built, none listed', async () => {
    const url = await createRepo();
    const main = await newRepo(alice, url);
    for (let i = 0; i < 2; i++) {
      await commitFiles(alice, main, { [`f${i}.txt`]: `change ${i}\n` }, `change ${i}`);
      await alice.ok(main, 'push', '-q', 'origin', 'main');
    }
    await alice.ok(main, 'branch', 'topic');
    const run = await pushTraced(main, 'topic');
    assert.deepEqual(
      run.filter((c) => c === 'pack-objects' || c === 'rev-list'),
      [],
    );
    await clonesWhole(url, main);
  });

  it('through the warm agent, which keeps the lists in memory: no index-pack, no file a push', async () => {
    const url = await createRepo();
    const main = await newRepo(alice, url);
    await commitFiles(alice, main, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(main, 'push', '-q', 'origin', 'main');
    const socket = path.join(alice.dir(), 'agent.sock');
    const agent = await spawnAgent(socket, alice.env);
    agentEnv = { KNOTLESS_AGENT_SOCKET: socket };
    const kept = () => (fs.existsSync(memo()) ? fs.readdirSync(memo()).sort() : []);
    const before = kept();
    try {
      const runs: string[][] = [];
      for (let i = 0; i < 8; i++) {
        await commitFiles(alice, main, { [`f${i}.txt`]: `change ${i}\n`.repeat(20) }, `change ${i}`);
        runs.push(await pushTraced(main, 'main'));
      }
      // The agent's git commands ran for these pushes (git's trace is in the environment they
      // were given), folds among them.
      assert.ok(
        runs.every((r) => r.includes('pack-objects')),
        JSON.stringify(runs),
      );
      assert.ok(
        runs.some((r) => r.filter((c) => c === 'pack-objects').length === 2),
        JSON.stringify(runs),
      );
      assert.deepEqual(
        runs.filter((r) => r.includes('index-pack')),
        [],
      );
      assert.deepEqual(kept(), before);
      assert.ok((await packsOf(url, 'refs/heads/main')) < 9);
      await clonesWhole(url, main);
    } finally {
      agentEnv = { KNOTLESS_AGENT: '0' };
      await agent.stop();
    }
  });
});
