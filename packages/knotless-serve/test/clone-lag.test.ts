// A plain-git clone from an appview that has not caught up never succeeds empty: the mirror lag is
// made certain, not timed: an appview that stopped following the PDS before the push (its index
// knows the repository, not its refs), and one whose mirror may not hold a repository this big.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitFiles, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, waitFor, xrpc } from './helpers.ts';

const t = useNetwork(['alice.test']);
const alice = useGitUser(t, 'alice.test', () => ({}));
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-clone-lag-'));
const database = path.join(dataDir, 'index.sqlite');
let app: Appview | undefined;

const refsOf = async (repo: string) =>
  (await xrpc<{ refs: unknown[] }>(app!, 'dev.knotless.getRepo', { actor: 'alice.test', repo })).refs.length;

describe('no empty success: a clone from an appview still catching up fails, retryably', () => {
  before(async () => {
    await t.ready;
    app = await appviewOn(t, database, dataDir);
  });
  after(async () => {
    await app?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('refuses with 503 and Retry-After while the index lacks the refs the owner holds, then clones whole', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'lag')).code, 0);
    assert.equal((await alice.knotless('repo', 'create', 'empty')).code, 0);
    await waitFor('the appview to know both repositories', async () => {
      for (const repo of ['lag', 'empty']) await refsOf(repo);
      return true;
    });
    await app!.idle();
    // The appview stops following: nothing pushed from here on reaches its index.
    await app!.close();
    app = await appviewOn(t, database, dataDir, { firehoses: [] });
    const src = alice.dir();
    await alice.ok(src, 'init', '-q');
    await commitFiles(alice, src, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/lag', 'main');
    const head = (await alice.ok(src, 'rev-parse', 'HEAD')).trim();

    const res = await fetch(`${app.url}/alice.test/lag/info/refs?service=git-upload-pack`);
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '5');
    const dir = alice.dir();
    const clone = await alice.git(dir, 'clone', `${app.url}/alice.test/lag`, 'lag');
    assert.notEqual(clone.code, 0, clone.stderr);
    assert.match(clone.stderr, /503/);
    assert.ok(!fs.existsSync(path.join(dir, 'lag')), 'git leaves no empty clone behind');
    // A repository the owner truly left empty is still cloned empty.
    const empty = await alice.git(dir, 'clone', `${app.url}/alice.test/empty`, 'empty');
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stderr, /empty repository/);

    // Following again: once the index has the refs, a clone waits for the mirror and gets them all.
    await app.close();
    app = await appviewOn(t, database, dataDir);
    await waitFor('the index to hold the push', async () => ((await refsOf('lag')) > 0 ? true : undefined));
    const whole = await alice.git(dir, 'clone', '-q', `${app.url}/alice.test/lag`, 'lag');
    assert.equal(whole.code, 0, whole.stderr);
    assert.equal((await alice.ok(`${dir}/lag`, 'rev-parse', 'HEAD')).trim(), head);
  });

  it('refuses a repository its mirror cannot hold rather than serve it empty', async () => {
    await app!.close();
    assert.equal((await alice.knotless('repo', 'create', 'held')).code, 0);
    const src = alice.dir();
    await alice.ok(src, 'init', '-q');
    await commitFiles(alice, src, { 'b.txt': 'b\n' }, 'first');
    await alice.ok(src, 'push', '-q', 'knotless://alice.test/held', 'main');
    app = await appviewOn(t, database, dataDir, { maxRepoBytes: 1 });
    await waitFor('the index to hold the push', async () => ((await refsOf('held')) > 0 ? true : undefined));
    const dir = alice.dir();
    const clone = await alice.git(dir, 'clone', `${app.url}/alice.test/held`, 'held');
    assert.notEqual(clone.code, 0, clone.stderr);
    assert.match(clone.stderr, /503/);
    assert.ok(!fs.existsSync(path.join(dir, 'held')), 'git leaves no empty clone behind');
  });
});
