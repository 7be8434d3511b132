// Issues and discovery through the appview: the appview (knotless-serve, in process, following the
// PDS's event stream) finds records in anyone's account; the CLI still decides states by the
// authority rule itself when it reads records directly.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import type { Appview } from '../../knotless-serve/src/appview.ts';
import { appviewOn, waitFor } from '../../knotless-serve/test/helpers.ts';
import { knotless } from './helpers/cli.ts';
import { json, openPr, useForgeNet, writeRaw, type ItemJson } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

let app: Appview | undefined;
const {
  t,
  users: [alice, bob, carol],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test'], () => app?.url);

/** The CLI as `user` without the appview: what a direct reading of the PDSes gives. */
function direct(user: typeof alice, ...args: string[]) {
  return knotless(args, { env: { ...user.env, KNOTLESS_COMPACT: '0' } });
}

let issue = '';

describe('issues, through the appview and directly', () => {
  // Inside the suite: the appview closes before the network does.
  before(async () => {
    await t.ready;
    app = await appviewOn(t, ':memory:');
  });
  after(async () => {
    await app?.close();
  });

  it("bob opens an issue on alice's repository; alice finds it only through the appview", async () => {
    assert.equal((await alice.knotless('repo', 'create', 'proj')).code, 0);
    const made = json<ItemJson>(
      await bob.knotless(
        'issue',
        'create',
        'alice.test/proj',
        '--title',
        'It crashes',
        '--body',
        'On start.',
        '--json',
      ),
    );
    assert.equal(made.state, 'open');
    assert.equal(made.author, 'bob.test');
    assert.equal(made.title, 'It crashes');
    issue = made.id;

    const listed = await waitFor('the appview to index the issue', async () => {
      const l = json<ItemJson[]>(await alice.knotless('issue', 'list', 'alice.test/proj', '--json'));
      return l.length > 0 ? l : undefined;
    });
    assert.deepEqual(
      listed.map((i) => [i.id, i.state, i.author]),
      [[issue, 'open', 'bob.test']],
    );
    const alone = await direct(alice, 'issue', 'list', 'alice.test/proj', '--json');
    assert.deepEqual(json(alone), []);
    assert.match(alone.stderr, /KNOTLESS_APPVIEW is not set/);
    // Without the appview, the author finds their own: the account named by handle in the environment.
    const own = await knotless(['issue', 'list', 'alice.test/proj', '--json'], {
      env: t.env({ KNOTLESS_IDENTIFIER: 'bob.test', KNOTLESS_PASSWORD: t.password }),
    });
    assert.deepEqual(
      json<ItemJson[]>(own).map((i) => i.id),
      [issue],
    );
    // The bare record key is unambiguous among the repository's issues: taken back too.
    const view = json<ItemJson>(
      await alice.knotless('issue', 'view', 'alice.test/proj', issue.split('/')[1]!, '--json'),
    );
    assert.equal(view.id, issue);
  });

  it('comments from anyone show through the appview; directly, those of the owner and author', async () => {
    for (const [user, body] of [
      [alice, 'Which version?'],
      [bob, 'The latest.'],
      [carol, 'Me too.'],
    ] as const) {
      const res = await user.knotless('issue', 'comment', 'alice.test/proj', issue, '--body', body);
      assert.equal(res.code, 0, res.stderr);
    }
    const viewed = await waitFor('the appview to index three comments', async () => {
      const v = json<ItemJson>(await alice.knotless('issue', 'view', 'alice.test/proj', issue, '--json'));
      return v.comments?.length === 3 ? v : undefined;
    });
    assert.deepEqual(
      viewed.comments!.map((c) => [c.author, c.body]),
      [
        ['alice.test', 'Which version?'],
        ['bob.test', 'The latest.'],
        ['carol.test', 'Me too.'],
      ],
    );
    const plain = json<ItemJson>(await direct(alice, 'issue', 'view', 'alice.test/proj', issue, '--json'));
    assert.deepEqual(
      plain.comments!.map((c) => c.author),
      ['alice.test', 'bob.test'],
    );
  });

  it('the owner closes; the author cannot reopen, whatever date their record says; the owner can; a third party may not', async () => {
    const closed = json<ItemJson>(await alice.knotless('issue', 'close', 'alice.test/proj', issue, '--json'));
    assert.equal(closed.state, 'closed');
    assert.equal(
      json<ItemJson>(await direct(carol, 'issue', 'view', 'alice.test/proj', issue, '--json')).state,
      'closed',
    );
    const denied = await bob.knotless('issue', 'reopen', 'alice.test/proj', issue);
    assert.equal(denied.code, 5, denied.stderr);
    assert.equal(
      denied.stderr.trim(),
      `knotless: alice.test/proj's owner closed ${issue}; only they can reopen it.`,
    );
    // Records written by hand, dated after and before the owner's close.
    const uri = `at://${issue.replace('/', '/dev.knotless.issue/')}`;
    for (const createdAt of ['2099-01-01T00:00:00.000Z', '1970-01-01T00:00:00.000Z'])
      await writeRaw(t, 'bob.test', 'dev.knotless.issue.state', { issue: uri, state: 'open', createdAt });
    for (const user of [alice, bob])
      assert.equal(
        json<ItemJson>(await direct(user, 'issue', 'view', 'alice.test/proj', issue, '--json')).state,
        'closed',
      );
    // The appview has seen bob's records by the time it has seen a later one of his.
    assert.equal(
      (await bob.knotless('issue', 'comment', 'alice.test/proj', issue, '--body', 'reopen!')).code,
      0,
    );
    const seen = await waitFor('the appview to index the fourth comment', async () => {
      const v = json<ItemJson>(await carol.knotless('issue', 'view', 'alice.test/proj', issue, '--json'));
      return v.comments?.length === 4 ? v : undefined;
    });
    assert.equal(seen.state, 'closed');
    for (const user of [alice, bob, carol])
      assert.deepEqual(
        json<ItemJson[]>(
          await user.knotless('issue', 'list', 'alice.test/proj', '--state', 'all', '--json'),
        ).map((i) => [i.id, i.state]),
        [[issue, 'closed']],
      );
    // The owner reopening after her own close counts.
    const reopened = await alice.knotless('issue', 'reopen', 'alice.test/proj', issue, '--json');
    assert.equal(json<ItemJson>(reopened).state, 'open');
    assert.equal(
      json<ItemJson>(await direct(bob, 'issue', 'view', 'alice.test/proj', issue, '--json')).state,
      'open',
    );

    const refused = await carol.knotless('issue', 'close', 'alice.test/proj', issue);
    assert.equal(refused.code, 5);
    assert.equal(
      refused.stderr.trim(),
      "knotless: Only alice.test/proj's owner or the issue's author can close it; you are carol.test.",
    );
    await writeRaw(t, 'carol.test', 'dev.knotless.issue.state', {
      issue: uri,
      state: 'closed',
      createdAt: new Date().toISOString(),
    });
    assert.equal(
      json<ItemJson>(await direct(bob, 'issue', 'view', 'alice.test/proj', issue, '--json')).state,
      'open',
    );
    // The appview has seen carol's record by the time it has seen a later one of bob's.
    const res = await bob.knotless('issue', 'comment', 'alice.test/proj', issue, '--body', 'still broken');
    assert.equal(res.code, 0, res.stderr);
    await waitFor('the appview to index the fifth comment', async () => {
      const v = json<ItemJson>(await alice.knotless('issue', 'view', 'alice.test/proj', issue, '--json'));
      return v.comments?.length === 5 ? v : undefined;
    });
    const open = json<ItemJson[]>(await alice.knotless('issue', 'list', 'alice.test/proj', '--json'));
    assert.deepEqual(
      open.map((i) => [i.id, i.state]),
      [[issue, 'open']],
    );
    assert.deepEqual(
      json(await alice.knotless('issue', 'list', 'alice.test/proj', '--state', 'closed', '--json')),
      [],
    );
  });

  it('the owner labels an issue, keeping its state; nobody else can', async () => {
    const labelled = json<ItemJson & { labels: string[] }>(
      await alice.knotless(
        'issue',
        'label',
        'alice.test/proj',
        issue,
        '--add',
        'bug',
        '--add',
        'ui',
        '--json',
      ),
    );
    assert.deepEqual(labelled.labels, ['bug', 'ui']);
    const seen = json<ItemJson & { labels: string[] }>(
      await direct(carol, 'issue', 'view', 'alice.test/proj', issue, '--json'),
    );
    assert.deepEqual([seen.state, seen.labels], ['open', ['bug', 'ui']]);
    const refused = await bob.knotless('issue', 'label', 'alice.test/proj', issue, '--add', 'mine');
    assert.equal(refused.code, 5, refused.stderr);
    json(await alice.knotless('issue', 'label', 'alice.test/proj', issue, '--remove', 'ui', '--json'));
    const after = json<ItemJson & { labels: string[] }>(
      await direct(bob, 'issue', 'view', 'alice.test/proj', issue, '--json'),
    );
    assert.deepEqual([after.state, after.labels], ['open', ['bug']]);
    const tooLong = await alice.knotless('issue', 'label', 'alice.test/proj', issue, '--add', 'é'.repeat(40));
    assert.equal(tooLong.code, 2, tooLong.stderr);
  });

  it("alice lists bob's pull request through the appview and sees it merged after she merges it", async () => {
    const dir = alice.dir();
    await alice.ok(dir, 'init', '-q');
    await commitFiles(alice, dir, { 'README.md': 'proj\n' }, 'first');
    await alice.ok(dir, 'push', '-q', 'knotless://alice.test/proj', 'main');
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/proj', '--name', 'proj-fork')).code, 0);
    const b = bob.dir();
    await bob.ok(b, 'clone', '-q', 'knotless://bob.test/proj-fork', 'c');
    await commitFiles(bob, `${b}/c`, { 'fix.txt': 'fixed\n' }, 'the fix');
    await bob.ok(`${b}/c`, 'push', '-q', 'origin', 'main:fix');
    const pr = await openPr(bob, 'alice.test/proj', 'proj-fork:fix', 'Fix the crash');
    const listed = await waitFor('the appview to index the pull request', async () => {
      const l = json<ItemJson[]>(await alice.knotless('pr', 'list', 'alice.test/proj', '--json'));
      return l.length > 0 ? l : undefined;
    });
    assert.deepEqual(
      listed.map((p) => [p.id, p.state, p.author, p.title]),
      [[pr.id, 'open', 'bob.test', 'Fix the crash']],
    );
    const merged = json<ItemJson>(
      await alice.knotless('pr', 'merge', 'alice.test/proj', pr.id.split('/')[1]!, '--json'),
    );
    assert.equal(merged.state, 'merged');
    await waitFor('the appview to see the merge', async () => {
      const l = json<ItemJson[]>(
        await alice.knotless('pr', 'list', 'alice.test/proj', '--state', 'merged', '--json'),
      );
      return l.length === 1 ? l : undefined;
    });
  });

  it('a pull request from a branch of the repository itself, merged by its owner', async () => {
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', 'knotless://alice.test/proj', 'c');
    await alice.ok(`${dir}/c`, 'switch', '-q', '-c', 'feature');
    const tip = await commitFiles(alice, `${dir}/c`, { 'feature.txt': 'new\n' }, 'a feature');
    await alice.ok(`${dir}/c`, 'push', '-q', 'origin', 'feature');
    const pr = await openPr(alice, 'proj', 'proj:feature', 'Feature', '--base', 'main');
    assert.equal(pr.author, 'alice.test');
    const merged = json<ItemJson & { merged: string }>(
      await alice.knotless('pr', 'merge', 'proj', pr.id, '--json'),
    );
    assert.equal(merged.merged, tip);
    const ls = await alice.ok(`${dir}/c`, 'ls-remote', 'origin', 'refs/heads/main');
    assert.equal(ls.split('\t')[0], tip);
  });

  it("skips an appview's view that is not a valid record, with a warning, and shows the rest", async () => {
    const repo = `at://${t.dids['alice.test']!}/dev.knotless.repo/proj`;
    // The appview's handles are not believed: one claims alice's handle for bob, one gives none.
    let made = Date.now();
    const view = (rkey: string, title: string, handle?: string) => ({
      uri: `at://${t.dids['bob.test']!}/dev.knotless.issue/${rkey}`,
      cid: 'bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm',
      author: { did: t.dids['bob.test']!, ...(handle === undefined ? {} : { handle }) },
      repo,
      title,
      state: 'open',
      labels: [],
      // Newest first in a listing: each view a second older than the one before.
      createdAt: new Date((made -= 1000)).toISOString(),
      indexedAt: new Date().toISOString(),
    });
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          issues: [
            view('3kaaaaaaaaaa2', 'x'.repeat(400), 'bob.test'),
            view('3kaaaaaaaaab2', 'fine', 'alice.test'),
            view('3kaaaaaaaaac2', 'unnamed'),
          ],
        }),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const res = await knotless(['issue', 'list', 'alice.test/proj', '--json'], {
        env: { ...carol.env, KNOTLESS_APPVIEW: `http://127.0.0.1:${port}` },
      });
      assert.deepEqual(
        json<ItemJson[]>(res).map((i) => [i.title, i.author]),
        [
          ['fine', 'bob.test'],
          ['unnamed', 'bob.test'],
        ],
      );
      assert.match(
        res.stderr,
        /warning: the appview's An invalid dev\.knotless\.issue record \(.*title.*\) was ignored/,
      );
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("suggests repo create only to the account itself, not to someone listing another's", async () => {
    const theirs = await alice.knotless('repo', 'list', 'carol.test');
    assert.equal(theirs.code, 0, theirs.stderr);
    assert.equal(theirs.stderr.trim(), 'carol.test has no repositories yet.');
    const own = await carol.knotless('repo', 'list');
    assert.equal(own.code, 0, own.stderr);
    assert.match(
      own.stderr,
      /carol\.test has no repositories yet; create one with `knotless repo create <name>`/,
    );
  });
});
