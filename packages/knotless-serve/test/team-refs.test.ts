// The appview computes a team's refs (format.md, "Teams") with knotless-core's rule, from the
// owner's table and the tables of the maintainers it lists, each read from the maintainer's own
// account: on a dev network of two PDSes (alice, the owner, on one; bob, her maintainer, on the
// other), bob's push through the helper shows on the branches page, in listRefs and getRepo, in
// a plain git clone from the appview (his packs read from his account), in listPushes and in the
// push webhook, each naming bob. A table of the same shape in carol's account (no maintainer)
// never counts; a value no entry supersedes is listed apart, as readers list it, and named on the
// pages; once alice removes bob, what he writes counts for nothing (what the repository held at the
// removal stays, absorbed into her table). For both index backends.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { tableHands } from '../../knotless/test/helpers/ref-table.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { startReceiver } from './webhook-receiver.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
const env = () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_REF_TABLE: '1' });
const alice = useGitUser(t, 'alice.test', env);
const bob = useGitUser(t, 'bob.test', env);
const carol = tableHands(t, 'carol.test');
const bobHands = tableHands(t, 'bob.test');

let pg: PgServer;
before(async () => {
  pg = await startPostgres();
  await t.ready;
  assert.notEqual(t.pdsOf['alice.test'], t.pdsOf['bob.test'], "bob's refs live on another PDS");
});
after(async () => {
  await pg?.stop();
});

interface RefView {
  ref: string;
  target?: string;
}
interface PushView {
  ref: string;
  after?: string;
  pusher?: string;
  pusherHandle?: string;
}

const refsOf = async (app: Appview, repo: string): Promise<Map<string, string | undefined>> => {
  const got = await xrpc<{ refs: RefView[] }>(app, 'dev.knotless.listRefs', { actor: 'alice.test', repo });
  return new Map(got.refs.map((r) => [r.ref, r.target]));
};

describe("the appview computes a team's refs", () => {
  for (const backend of ['sqlite', 'postgres'] as const) {
    it(`shows a maintainer's push everywhere, a stranger's nowhere, and nothing a removed maintainer writes (${backend})`, async () => {
      const app = await appviewOn(
        t,
        backend === 'sqlite' ? ':memory:' : await pg.createDatabase(`team_${backend}`),
      );
      after(() => app.close());
      const rx = await startReceiver();
      after(() => rx.close());
      const name = `team-${backend}`;
      const aliceDid = t.dids['alice.test']!;
      const bobDid = t.dids['bob.test']!;

      assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
      const url = `knotless://alice.test/${name}`;
      const work = await newRepo(alice, url);
      const first = await commitFiles(alice, work, { 'a.txt': 'first\n' }, 'first');
      await alice.ok(work, 'push', '-q', 'origin', 'main');
      const added = await alice.knotless('repo', 'maintainer', 'add', name, 'bob.test');
      assert.equal(added.code, 0, added.stderr);
      await waitFor(`${name} indexed with its maintainer`, async () => {
        const page = await get(`${app.url}/alice.test/${name}`);
        return page.text.includes('class="muted maintainers"') ? true : undefined;
      });
      await app.index.webhooks.add(aliceDid, name, rx.url);

      // Bob pushes a branch through the helper: his table, his packs, in his own account.
      const dir = bob.dir();
      await bob.ok(dir, 'clone', '-q', url, 'w');
      const w = `${dir}/w`;
      const topic = await commitFiles(bob, w, { 'bob.txt': 'from bob\n' }, 'bob');
      await bob.ok(w, 'push', '-q', 'origin', 'HEAD:refs/heads/bob-topic');

      await waitFor("bob's branch in listRefs", async () =>
        (await refsOf(app, name)).get('refs/heads/bob-topic') === topic ? true : undefined,
      );
      const repo = await xrpc<{ refs: RefView[] }>(app, 'dev.knotless.getRepo', {
        actor: 'alice.test',
        repo: name,
      });
      assert.ok(repo.refs.some((r) => r.ref === 'refs/heads/bob-topic' && r.target === topic));
      const branches = await waitFor("bob's branch on the branches page", async () => {
        const page = await get(`${app.url}/alice.test/${name}/branches`);
        return page.status === 200 && page.text.includes('bob-topic') ? page.text : undefined;
      });
      assert.ok(branches.includes('main'));

      // A plain git clone from the appview has it: bob's packs were read from bob's PDS.
      const cdir = alice.dir();
      await alice.ok(cdir, 'clone', '-q', `${app.url}/alice.test/${name}`, 'c');
      assert.equal((await alice.ok(`${cdir}/c`, 'rev-parse', 'origin/bob-topic')).trim(), topic);
      assert.equal((await alice.ok(`${cdir}/c`, 'show', `${topic}:bob.txt`)).trim(), 'from bob');

      // listPushes and the webhook name bob.
      const pushes = await xrpc<{ pushes: PushView[] }>(app, 'dev.knotless.listPushes', {
        actor: 'alice.test',
        repo: name,
      });
      const byBob = pushes.pushes.find((p) => p.ref === 'refs/heads/bob-topic');
      assert.deepEqual([byBob?.after, byBob?.pusher, byBob?.pusherHandle], [topic, bobDid, 'bob.test']);
      const hooked = await waitFor("bob's push delivered", () =>
        Promise.resolve(
          rx.received
            .map((r) => JSON.parse(r.body) as { ref?: string; after?: string; pusher?: { did: string } })
            .find((e) => e.ref === 'refs/heads/bob-topic'),
        ),
      );
      assert.deepEqual([hooked.after, hooked.pusher?.did], [topic, bobDid]);

      // Carol, no maintainer, writes a table of the same shape under the key a maintainer's has.
      await carol.writeMemberTable(aliceDid, name, [
        { ref: 'refs/heads/evil', target: first, packs: [], over: [{ did: aliceDid }] },
        { ref: 'refs/heads/main', target: topic, packs: [], over: [{ did: aliceDid, target: first }] },
      ]);
      // A value no entry supersedes (bob's main, written over nothing of alice's) is listed apart.
      await bobHands.writeMemberTable(aliceDid, name, [
        { ref: 'refs/heads/bob-topic', target: topic, packs: [], over: [] },
        { ref: 'refs/heads/main', target: topic, packs: [], over: [] },
      ]);
      const diverged = await waitFor('the diverged main listed apart', async () => {
        const refs = await refsOf(app, name);
        return refs.has('refs/maintainers/bob.test/heads/main') ? refs : undefined;
      });
      assert.equal(diverged.get('refs/heads/main'), first, "the owner's value counts");
      assert.equal(diverged.get('refs/maintainers/bob.test/heads/main'), topic);
      assert.equal(diverged.has('refs/heads/evil'), false, "carol's table counts for nothing");
      assert.ok(![...diverged.keys()].some((r) => r.includes('carol')));
      assert.ok(!rx.received.some((r) => r.body.includes('refs/heads/evil')), 'no webhook for carol');

      // The diverged ref is named on the repository page and the branches page.
      for (const path of [`/alice.test/${name}`, `/alice.test/${name}/branches`]) {
        const page = await get(`${app.url}${path}`);
        assert.match(
          page.text,
          /diverged <code>refs\/heads\/main<\/code>: also\s+<code>refs\/maintainers\/bob\.test\/heads\/main<\/code>/,
          path,
        );
      }

      // Alice removes bob: the removal keeps what the repository held (his acknowledged branch,
      // absorbed into her table, format.md "Removal"), and his table stops counting at once.
      const removed = await alice.knotless('repo', 'maintainer', 'remove', name, 'bob.test');
      assert.equal(removed.code, 0, removed.stderr);
      // The two accounts' streams are not ordered against each other: bob writes once the appview
      // has indexed the removal, as "after the removal" means for an index of events as they come.
      await waitFor('the removal indexed', async () =>
        (await app.index.maintainers(aliceDid, name)).length === 0 ? true : undefined,
      );
      await bobHands.writeMemberTable(aliceDid, name, [
        { ref: 'refs/heads/bob-topic', target: first, packs: [], over: [{ did: aliceDid, target: topic }] },
        { ref: 'refs/heads/bob-late', target: topic, packs: [], over: [{ did: aliceDid }] },
      ]);
      // Bob's later table is in the index: from here on, what it says must show nowhere.
      await waitFor("bob's table after the removal indexed", async () => {
        const table = await app.index.db
          .selectFrom('ref_tables')
          .select('value')
          .where('did', '=', bobDid)
          .where('deleted', '=', 0)
          .executeTakeFirst();
        return table?.value?.includes('bob-late') === true ? true : undefined;
      });
      const left = await waitFor('the listing without bob', async () => {
        const refs = await refsOf(app, name);
        return [...refs.keys()].some((r) => r.startsWith('refs/maintainers/')) ? undefined : refs;
      });
      assert.deepEqual([...left.keys()].sort(), ['HEAD', 'refs/heads/bob-topic', 'refs/heads/main']);
      assert.deepEqual([left.get('refs/heads/main'), left.get('refs/heads/bob-topic')], [first, topic]);
      const pushed = await xrpc<{ pushes: PushView[] }>(app, 'dev.knotless.listPushes', {
        actor: 'alice.test',
        repo: name,
      });
      assert.ok(
        !pushed.pushes.some((p) => p.ref === 'refs/heads/bob-late'),
        'no push by a removed maintainer',
      );
      assert.ok(!rx.received.some((r) => r.body.includes('bob-late')), 'no webhook for a removed maintainer');
      const page = await get(`${app.url}/alice.test/${name}/branches`);
      assert.ok(!page.text.includes('bob-late') && !page.text.includes('diverged'), 'the branches page');
      const again = alice.dir();
      await alice.ok(again, 'clone', '-q', `${app.url}/alice.test/${name}`, 'c');
      const heads = await alice.ok(
        `${again}/c`,
        'for-each-ref',
        '--format=%(refname) %(objectname)',
        'refs/remotes',
      );
      assert.ok(!heads.includes('bob-late'), heads);
      assert.ok(heads.includes(`refs/remotes/origin/bob-topic ${topic}`), heads);
    });
  }
});
