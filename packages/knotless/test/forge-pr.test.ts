import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Proxy } from 'knotless-devnet';
import { knotless } from './helpers/cli.ts';
import {
  NO_CLONE,
  deleteRaw,
  json,
  newSite,
  pdsOf,
  proxyFor,
  tipOf,
  useForgeNet,
  writeRaw,
  type ItemJson,
} from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

const {
  t,
  users: [alice, bob, carol],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test']);

// Until the first test makes them: a path that does not exist, so that a test running after a
// failed setup fails to start git instead of running it in the current directory.
let aliceClone = NO_CLONE;
let bobClone = NO_CLONE;
let firstPr = '';

let proxy: Proxy | undefined;

describe('forks and pull requests across accounts: fork, rounds, comments, who may decide', () => {
  before(async () => {
    await t.ready;
    proxy = await proxyFor(t, 'bob.test');
  });
  after(async () => {
    await proxy?.close();
  });

  it('forks alice.test/site into bob.test: every ref copied, forkOf names the original', async () => {
    aliceClone = await newSite(alice, 'alice.test');

    const denied = await bob.git(aliceClone, 'push', 'knotless://alice.test/site', 'main:bob');
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /fork it with `knotless repo fork alice\.test\/site` and push to the fork/);
    const fork = await bob.knotless('repo', 'fork', 'alice.test/site', '--json');
    const forked = json<{ forkOf: string; refs: number }>(fork);
    assert.equal(forked.forkOf, `at://${t.dids['alice.test']}/dev.knotless.repo/site`);
    assert.equal(forked.refs, 1, 'main (HEAD is copied too but, as in repo info, not counted)');
    assert.match(fork.stderr, /\(1 ref copied\)/);
    const info = json<{ forkOf?: string }>(await bob.knotless('repo', 'info', 'bob.test/site', '--json'));
    assert.equal(info.forkOf, forked.forkOf);

    // A fork that stopped half way is finished by running it again; a whole one is refused. alice's
    // site is on its ref table (the default), so the fork is too: half way is its record without the table.
    await deleteRaw(t, 'bob.test', 'dev.knotless.refs', 'site');
    const resumed = json<{ refs: number }>(await bob.knotless('repo', 'fork', 'alice.test/site', '--json'));
    assert.equal(resumed.refs, 1);
    const again = await bob.knotless('repo', 'fork', 'alice.test/site');
    assert.equal(again.code, 6, again.stderr);
    // Forking one's own repository that does not exist: it is missing, not "your own".
    const nothing = await bob.knotless('repo', 'fork', 'bob.test/nothing-here');
    assert.equal(nothing.code, 7, nothing.stderr);
    assert.doesNotMatch(nothing.stderr, /your own/);
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://bob.test/site', 'c');
    bobClone = `${dir}/c`;
    assert.equal(
      (await bob.ok(bobClone, 'rev-parse', 'HEAD')).trim(),
      (await alice.ok(aliceClone, 'rev-parse', 'HEAD')).trim(),
    );
  });

  it('bob pushes a branch to his fork and opens a pull request; ids printed are taken back', async () => {
    // A --head that is not [handle/]repo:branch is a usage error (exit 2), whatever part is wrong.
    for (const head of ['alice.test/site/extra:fix', 'site', 'site:bad..name', ':fix']) {
      const bad = await bob.knotless('pr', 'create', 'alice.test/site', '--head', head, '--title', 'T');
      assert.equal(bad.code, 2, `${head}: ${bad.stderr}`);
      assert.match(bad.stderr, /^knotless: .+\n$/, head);
    }
    await bob.ok(bobClone, 'switch', '-q', '-c', 'fix');
    await commitFiles(bob, bobClone, { 'b.txt': 'from bob\n' }, 'bob adds b');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'fix');
    const res = await bob.knotless(
      'pr',
      'create',
      'alice.test/site',
      '--head',
      'site:fix',
      '--base',
      'main',
      '--title',
      'Add b',
      '--body',
      'Please.',
      '--json',
    );
    const pr = json<ItemJson>(res);
    assert.equal(pr.state, 'open');
    assert.equal(pr.title, 'Add b');
    assert.equal(pr.author, 'bob.test');
    assert.match(pr.id, /^did:plc:[a-z0-9]+\/[a-z2-7]{13}$/);
    firstPr = pr.id;

    const listed = json<ItemJson[]>(await bob.knotless('pr', 'list', 'alice.test/site', '--json'));
    assert.deepEqual(
      listed.map((p) => p.id),
      [pr.id],
    );
    const rkey = pr.id.split('/')[1]!;
    for (const id of [pr.id, pr.uri, `bob.test/${rkey}`, rkey]) {
      const view = json<ItemJson>(await bob.knotless('pr', 'view', 'alice.test/site', id, '--json'));
      assert.equal(view.id, pr.id, `id form ${id}`);
    }
    const view = json<ItemJson>(await alice.knotless('pr', 'view', 'alice.test/site', pr.id, '--json'));
    assert.deepEqual(view.diff, { files: 1, insertions: 1, deletions: 0 });
    const text = await alice.knotless('pr', 'view', 'alice.test/site', pr.id);
    assert.match(text.stdout, /Add b/);
    assert.match(text.stdout, /rounds \(1\)/);
    // The head repository as people write it, and one file in the singular.
    assert.match(text.stdout, /^ {2}from {5}bob\.test\/site fix$/m);
    assert.match(text.stdout, /^ {2}diff {5}1 file changed, \+1 -0$/m);
  });

  it('alice comments on round 0, bob pushes again and adds round 1', async () => {
    const c = await alice.knotless(
      'pr',
      'comment',
      'alice.test/site',
      firstPr,
      '--round',
      '0',
      '--body',
      'Add a newline too?',
    );
    assert.equal(c.code, 0, c.stderr);
    await commitFiles(bob, bobClone, { 'b.txt': 'from bob\n\n' }, 'bob adds a newline');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'fix');
    const up = json<ItemJson>(await bob.knotless('pr', 'update', 'alice.test/site', firstPr, '--json'));
    assert.equal(up.rounds, 2);
    const again = await bob.knotless('pr', 'update', 'alice.test/site', firstPr);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /nothing was written/);
    const view = json<ItemJson>(await bob.knotless('pr', 'view', 'alice.test/site', firstPr, '--json'));
    assert.equal((view.rounds as unknown[]).length, 2);
    assert.deepEqual(
      view.comments?.map((x) => [x.author, x.round, x.body]),
      [['alice.test', 0, 'Add a newline too?']],
    );
    // Only the author adds rounds.
    const foreign = await alice.knotless('pr', 'update', 'alice.test/site', firstPr);
    assert.equal(foreign.code, 5, foreign.stderr);
  });

  it('writes a comment whose answer was lost once: the retry meets its first copy', async () => {
    proxy!.inject({ nsid: 'com.atproto.repo.putRecord', fault: { kind: 'cut', bytes: 0 } });
    const res = await knotless(['pr', 'comment', 'alice.test/site', firstPr, '--body', 'once only'], {
      env: { ...bob.env, KNOTLESS_SERVICE: proxy!.url, KNOTLESS_RETRY_BASE_MS: '10' },
    });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(proxy!.faultsFired.length, 1);
    assert.equal(proxy!.count('com.atproto.repo.putRecord'), 2, 'sent again after the lost answer');
    const listed = (await (
      await fetch(
        `${pdsOf(t, 'bob.test')}/xrpc/com.atproto.repo.listRecords?repo=${t.dids['bob.test']!}&collection=dev.knotless.comment`,
      )
    ).json()) as { records: { value: { body: string } }[] };
    assert.equal(listed.records.filter((r) => r.value.body === 'once only').length, 1);
    proxy!.clearFaults();
    proxy!.reset();
  });

  it('ignores status records nobody may write: a third party, and the author claiming a merge', async () => {
    const uri = `at://${firstPr.replace('/', '/dev.knotless.pull/')}`;
    await writeRaw(t, 'carol.test', 'dev.knotless.pull.status', {
      pull: uri,
      status: 'closed',
      createdAt: new Date().toISOString(),
    });
    await writeRaw(t, 'bob.test', 'dev.knotless.pull.status', {
      pull: uri,
      status: 'merged',
      merged: 'f'.repeat(40),
      createdAt: new Date().toISOString(),
    });
    for (const user of [alice, bob, carol]) {
      const view = json<ItemJson>(await user.knotless('pr', 'view', 'alice.test/site', firstPr, '--json'));
      assert.equal(view.state, 'open');
      assert.equal(view.merged, undefined);
    }
  });

  it('refuses the merge to bob with one sentence and writes nothing', async () => {
    const before = await tipOf(alice, 'knotless://alice.test/site', 'main');
    const res = await bob.knotless('pr', 'merge', 'alice.test/site', firstPr);
    assert.equal(res.code, 5);
    assert.equal(res.stderr.trim(), "knotless: Only alice.test/site's owner can merge it; you are bob.test.");
    assert.equal(await tipOf(alice, 'knotless://alice.test/site', 'main'), before);
  });

  it("alice merges: her main then holds bob's commits, and the pull request is merged", async () => {
    const res = await alice.knotless('pr', 'merge', 'alice.test/site', firstPr, '--json');
    const merged = json<ItemJson & { fastForward: boolean }>(res);
    assert.equal(merged.state, 'merged');
    assert.equal(merged.fastForward, true);
    const bobTip = (await bob.ok(bobClone, 'rev-parse', 'fix')).trim();
    assert.equal(await tipOf(alice, 'knotless://alice.test/site', 'main'), bobTip);
    await alice.ok(aliceClone, 'pull', '-q', '--ff-only', 'origin', 'main');
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD')).trim(), bobTip);
    const view = json<ItemJson>(await carol.knotless('pr', 'view', 'alice.test/site', firstPr, '--json'));
    assert.equal(view.state, 'merged');
    assert.equal(view.merged, bobTip);
    const again = await alice.knotless('pr', 'merge', 'alice.test/site', firstPr);
    assert.equal(again.code, 2, again.stderr);
    const close = await bob.knotless('pr', 'close', 'alice.test/site', firstPr);
    assert.equal(close.code, 2, close.stderr);
    assert.match(close.stderr, /is merged; there is nothing to close/);
  });
});
