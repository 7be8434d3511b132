import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KNOTLESS_BIN, knotless, runProcess } from './helpers/cli.ts';
import {
  NO_CLONE,
  json,
  newSite,
  openPr,
  putHookProxy,
  type PutHookProxy,
  tipOf,
  useForgeNet,
  type ItemJson,
} from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

const {
  t,
  users: [alice, bob],
  env: quiet,
} = useForgeNet(['alice.test', 'bob.test']);

// Until the first test makes them: a path that does not exist, so that a test running after a
// failed setup fails to start git instead of running it in the current directory.
let aliceClone = NO_CLONE;
let bobClone = NO_CLONE;

/** Alice's requests, with a hook before the next putRecord. */
let hooked: PutHookProxy | undefined;

describe('merging pull requests: conflicts, rebase, squash, a moving base', () => {
  before(async () => {
    await t.ready;
    hooked = await putHookProxy(t, 'alice.test');
  });
  after(async () => {
    await hooked?.proxy.close();
  });

  it('alice has a repository and bob a fork of it, both cloned', async () => {
    aliceClone = await newSite(alice, 'alice.test');
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://bob.test/site', 'c');
    bobClone = `${dir}/c`;
  });

  it('reports a conflict in one sentence and writes nothing (no push, no status)', async () => {
    await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site', 'main');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'clash', 'FETCH_HEAD');
    await commitFiles(bob, bobClone, { 'a.txt': 'one\nBOB\nthree\n' }, 'bob edits a');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'clash');
    const pr = await openPr(bob, 'alice.test/site', 'bob.test/site:clash', 'Edit a');
    await commitFiles(alice, aliceClone, { 'a.txt': 'one\nALICE\nthree\n' }, 'alice edits a');
    await alice.ok(aliceClone, 'push', '-q', 'origin', 'main');
    const before = await tipOf(alice, 'knotless://alice.test/site', 'main');
    const res = await alice.knotless('pr', 'merge', 'alice.test/site', pr.id);
    assert.equal(res.code, 16, res.stderr);
    assert.equal(res.stderr.trim().split('\n').length, 1, res.stderr);
    assert.match(res.stderr, /conflicts with main of alice\.test\/site; nothing was written/);
    assert.equal(await tipOf(alice, 'knotless://alice.test/site', 'main'), before);
    const view = json<ItemJson>(await alice.knotless('pr', 'view', 'alice.test/site', pr.id, '--json'));
    assert.equal(view.state, 'open');
    const closed = json<ItemJson>(await bob.knotless('pr', 'close', 'alice.test/site', pr.id, '--json'));
    assert.equal(closed.state, 'closed');
    const seen = json<ItemJson>(await alice.knotless('pr', 'view', 'alice.test/site', pr.id, '--json'));
    assert.equal(seen.state, 'closed');
    assert.equal(
      json<ItemJson>(await bob.knotless('pr', 'reopen', 'alice.test/site', pr.id, '--json')).state,
      'open',
    );
    assert.equal(
      json<ItemJson>(await alice.knotless('pr', 'view', 'alice.test/site', pr.id, '--json')).state,
      'open',
    );
    assert.equal(
      json<ItemJson>(await alice.knotless('pr', 'close', 'alice.test/site', pr.id, '--json')).state,
      'closed',
    );
    const open = json<ItemJson[]>(await bob.knotless('pr', 'list', 'alice.test/site', '--json'));
    assert.deepEqual(open, []);
    const all = json<ItemJson[]>(
      await bob.knotless('pr', 'list', 'alice.test/site', '--state', 'all', '--json'),
    );
    assert.deepEqual(
      all.map((p) => [p.id, p.state]),
      [[pr.id, 'closed']],
    );
  });

  it('checks out, and merges (--rebase onto a moved base), a pull request whose branch was deleted', async () => {
    await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site', 'main');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'gone', 'FETCH_HEAD~1');
    const c1 = await commitFiles(bob, bobClone, { 'c.txt': 'c\n' }, 'bob adds c');
    const c2 = await commitFiles(bob, bobClone, { 'd.txt': 'd\n' }, 'bob adds d');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'gone');
    const pr = await openPr(bob, 'alice.test/site', 'site:gone', 'Add c and d');
    await bob.ok(bobClone, 'push', '-q', 'origin', ':gone');
    assert.equal(await tipOf(bob, 'knotless://bob.test/site', 'gone'), '');

    const checkout = await runProcess(
      process.execPath,
      [KNOTLESS_BIN, 'pr', 'checkout', 'alice.test/site', pr.id],
      {
        env: { ...alice.env, ...quiet() },
        cwd: aliceClone,
      },
    );
    assert.equal(checkout.code, 0, checkout.stderr);
    const branch = `pr/${pr.id.split('/')[1]!}`;
    assert.equal(checkout.stdout.trim(), branch);
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD')).trim(), c2);
    assert.equal((await alice.ok(aliceClone, 'symbolic-ref', '--short', 'HEAD')).trim(), branch);
    await alice.ok(aliceClone, 'switch', '-q', 'main');

    const before = await tipOf(alice, 'knotless://alice.test/site', 'main');
    const res = await alice.knotless('pr', 'merge', 'alice.test/site', pr.id, '--rebase', '--json');
    const merged = json<ItemJson & { fastForward: boolean }>(res);
    assert.equal(merged.fastForward, false);
    await alice.ok(aliceClone, 'pull', '-q', '--ff-only', 'origin', 'main');
    const head = (await alice.ok(aliceClone, 'rev-parse', 'HEAD')).trim();
    assert.equal(head, merged.merged);
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD~2')).trim(), before);
    assert.equal(
      await alice.ok(aliceClone, 'log', '--format=%an %s', '-2'),
      'bob.test bob adds d\nbob.test bob adds c\n',
    );
    assert.notEqual(head, c2, 'replayed, not fast-forwarded');
    assert.equal(await alice.ok(aliceClone, 'show', 'HEAD:c.txt'), 'c\n');
    assert.equal(await alice.ok(aliceClone, 'show', 'HEAD:a.txt'), 'one\nALICE\nthree\n');
    void c1;
  });

  it('squashes a pull request into one commit by alice with the title as message, only at the head reviewed (--match-head-commit)', async () => {
    await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site', 'main');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'two', 'FETCH_HEAD');
    await commitFiles(bob, bobClone, { 'e.txt': 'e\n' }, 'e');
    await commitFiles(bob, bobClone, { 'f.txt': 'f\n' }, 'f');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'two');
    const pr = await openPr(bob, 'alice.test/site', 'site:two', 'E and F');
    const before = await tipOf(alice, 'knotless://alice.test/site', 'main');
    const head = (await bob.ok(bobClone, 'rev-parse', 'HEAD')).trim();
    const reviewed = (await bob.ok(bobClone, 'rev-parse', 'HEAD~1')).trim();
    const refused = await alice.knotless(
      'pr',
      'merge',
      'alice.test/site',
      pr.id,
      '--match-head-commit',
      reviewed,
    );
    assert.equal(refused.code, 15, refused.stderr);
    assert.equal(
      refused.stderr.trim(),
      `knotless: ${pr.id}'s head is ${head.slice(0, 12)}, not ${reviewed}; nothing was merged (view it again with \`knotless pr view\`).`,
    );
    assert.equal(await tipOf(alice, 'knotless://alice.test/site', 'main'), before);
    const bad = await alice.knotless('pr', 'merge', 'alice.test/site', pr.id, '--match-head-commit', 'main');
    assert.equal(bad.code, 2, bad.stderr);
    const merged = json<ItemJson>(
      await alice.knotless(
        'pr',
        'merge',
        'alice.test/site',
        pr.id,
        '--squash',
        '--match-head-commit',
        head.slice(0, 12).toUpperCase(),
        '--json',
      ),
    );
    await alice.ok(aliceClone, 'pull', '-q', '--ff-only', 'origin', 'main');
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD')).trim(), merged.merged);
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD~1')).trim(), before);
    assert.equal((await alice.ok(aliceClone, 'log', '--format=%s', '-1')).trim(), 'E and F');
    assert.equal(await alice.ok(aliceClone, 'show', 'HEAD:f.txt'), 'f\n');
  });

  it('writes nothing when the base moves while merging, then merges with a merge commit', async () => {
    await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site', 'main');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'late', 'FETCH_HEAD');
    const bobCommit = await commitFiles(bob, bobClone, { 'g.txt': 'g\n' }, 'bob adds g');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'late');
    const pr = await openPr(bob, 'alice.test/site', 'site:late', 'G');
    let aliceCommit = '';
    // Alice's own push lands (directly, not through the proxy) just before the merge's write does.
    hooked!.beforeNextPut(async () => {
      aliceCommit = await commitFiles(alice, aliceClone, { 'h.txt': 'h\n' }, 'alice adds h');
      await alice.ok(aliceClone, 'push', '-q', 'origin', 'main');
    });
    const res = await knotless(['pr', 'merge', 'alice.test/site', pr.id], {
      env: { ...alice.env, KNOTLESS_SERVICE: hooked!.proxy.url },
    });
    assert.equal(hooked!.failure(), undefined);
    assert.equal(res.code, 15, res.stderr);
    assert.equal(
      res.stderr.trim(),
      'knotless: main of alice.test/site moved while merging; nothing was written: run `knotless pr merge` again.',
    );
    assert.notEqual(aliceCommit, '');
    assert.equal(await tipOf(alice, 'knotless://alice.test/site', 'main'), aliceCommit);
    assert.equal(
      json<ItemJson>(await bob.knotless('pr', 'view', 'alice.test/site', pr.id, '--json')).state,
      'open',
    );

    const merged = json<ItemJson & { fastForward: boolean }>(
      await alice.knotless('pr', 'merge', 'alice.test/site', pr.id, '--merge', '--json'),
    );
    assert.equal(merged.fastForward, false);
    await alice.ok(aliceClone, 'pull', '-q', '--ff-only', 'origin', 'main');
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD')).trim(), merged.merged);
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD^1')).trim(), aliceCommit);
    assert.equal((await alice.ok(aliceClone, 'rev-parse', 'HEAD^2')).trim(), bobCommit);
    assert.match(
      await alice.ok(aliceClone, 'log', '--format=%s', '-1'),
      new RegExp(`^Merge pull request ${pr.id} from late`),
    );
  });

  it('costs a few requests: create, view, comment, merge (counted with KNOTLESS_TRACE)', async (ctx) => {
    const calls = (res: { stderr: string }) =>
      res.stderr
        .split('\n')
        .filter((l) => l.startsWith('knotless: trace GET') || l.startsWith('knotless: trace POST'))
        .map((l) => l.split(' ')[4]!);
    const traced = (user: typeof alice, ...args: string[]) =>
      knotless(args, { env: { ...user.env, KNOTLESS_COMPACT: '0', KNOTLESS_TRACE: '1' } });
    await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site', 'main');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'costs', 'FETCH_HEAD');
    await commitFiles(bob, bobClone, { 'i.txt': 'i\n' }, 'i');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'costs');
    const create = await traced(
      bob,
      'pr',
      'create',
      'alice.test/site',
      '--head',
      'site:costs',
      '--title',
      'I',
      '--json',
    );
    const id = json<ItemJson>(create).id;
    const view = await traced(alice, 'pr', 'view', 'alice.test/site', id, '--json');
    const comment = await traced(alice, 'pr', 'comment', 'alice.test/site', id, '--body', 'ok');
    const merge = await traced(alice, 'pr', 'merge', 'alice.test/site', id);
    assert.equal(merge.code, 0, merge.stderr);
    for (const [name, res] of Object.entries({ create, view, comment, merge }))
      ctx.diagnostic(`pr ${name}: ${calls(res).length} requests: ${calls(res).join(', ')}`);
    // Upper bounds: the records read, the listings of the two branches, the pack, the writes; view
    // also lists the head repository's refs, to check the rounds against its branch. A handle read
    // from the cache is checked afresh beside the first request: on the dev network each PDS is
    // asked (resolveHandle), where the real network asks DNS; those are counted apart. Each bound
    // also holds the verified reads of the ref tables the command reads (sync.getRecord), traced as
    // every request of the client is.
    const isCheck = (c: string) => c === 'com.atproto.identity.resolveHandle';
    const pds = (res: { stderr: string }) => calls(res).filter((c) => !isCheck(c));
    for (const res of [create, view, comment, merge])
      assert.ok(calls(res).filter(isCheck).length <= 2 * 2, calls(res).join(', '));
    assert.ok(pds(create).length <= 8 + 3, calls(create).join(', '));
    assert.ok(pds(view).length <= 9 + 3, calls(view).join(', '));
    assert.ok(pds(comment).length <= 6 + 1, calls(comment).join(', '));
    assert.ok(pds(merge).length <= 9 + 2, calls(merge).join(', '));
  });
});
