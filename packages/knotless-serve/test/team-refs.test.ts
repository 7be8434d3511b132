// The appview computes a team's refs (format.md, "Teams") with knotless-core's rule, from the
// owner's table and the tables of the maintainers it lists, each read from the maintainer's own
// account: on a dev network of two PDSes (alice, the owner, on one; bob, her maintainer, on the
// other), bob's push through the helper shows on the branches page, in listRefs and getRepo, in
// a plain git clone from the appview (his packs read from his account), in listPushes and in the
// push webhook, each naming bob. A table of the same shape in carol's account (no maintainer)
// never counts; a value no entry supersedes is listed apart, as readers list it, and named on the
// pages; once alice removes bob, what he writes counts for nothing (what the repository held at the
// removal stays, absorbed into her table). With two maintainers writing (bob on one PDS, carol on
// the other), the owner and both push main in turn, then bob and carol diverge on a branch (carol
// killed between her write and her withdrawal) and bob ends it: after each step, the appview's
// pages, listRefs, getRepo and a plain git clone show exactly what `git ls-remote knotless://…` shows.
// For both index backends.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { lsRemote, tableHands } from '../../knotless/test/helpers/ref-table.ts';
import type { Run } from '../../knotless/test/helpers/cli.ts';
import type { Appview } from '../src/appview.ts';
import { appviewOn, get, waitFor, xrpc } from './helpers.ts';
import { startPostgres, type PgServer } from './postgres.ts';
import { startReceiver } from './webhook-receiver.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
/** Per user, more environment for the commands run now. */
const extra: Record<string, Record<string, string>> = { alice: {}, bob: {}, carol: {} };
const envOf = (who: string) => () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_REF_TABLE: '1', ...extra[who] });
const alice = useGitUser(t, 'alice.test', envOf('alice'));
const bob = useGitUser(t, 'bob.test', envOf('bob'));
const carolGit = useGitUser(t, 'carol.test', envOf('carol'));
const carol = tableHands(t, 'carol.test');
const bobHands = tableHands(t, 'bob.test');

let pg: PgServer;
before(async () => {
  pg = await startPostgres();
  await t.ready;
  assert.notEqual(t.pdsOf['alice.test'], t.pdsOf['bob.test'], "bob's refs live on another PDS");
  assert.notEqual(t.pdsOf['bob.test'], t.pdsOf['carol.test'], 'bob and carol are on two PDSes');
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

/**
 * Runs `push` (a git push from `work`) held after its listing: `between` runs once the helper has
 * listed the refs and git has decided the update (a pre-push hook waits), then the push goes on.
 */
async function heldPush(work: string, push: () => Promise<Run>, between: () => Promise<void>): Promise<Run> {
  const gate = fs.mkdtempSync(path.join(t.tmpdir(), 'gate-'));
  const hook = path.join(work, '.git', 'hooks', 'pre-push');
  fs.writeFileSync(
    hook,
    `#!/bin/sh\ntouch '${gate}/listed'\nwhile [ ! -e '${gate}/go' ]; do sleep 0.05; done\n`,
    { mode: 0o755 },
  );
  try {
    const running = push();
    let done = false;
    void running.then(() => (done = true));
    while (!fs.existsSync(`${gate}/listed`)) {
      if (done) assert.fail(`the push ended before its pre-push hook: ${(await running).stderr}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    await between();
    fs.writeFileSync(`${gate}/go`, '');
    return await running;
  } finally {
    fs.rmSync(hook);
  }
}

describe('the appview with two maintainers writing', () => {
  for (const backend of ['sqlite', 'postgres'] as const) {
    it(`shows what the CLI lists after each push of the owner's and two maintainers', and a divergence with who wrote it (${backend})`, async () => {
      const app = await appviewOn(
        t,
        backend === 'sqlite' ? ':memory:' : await pg.createDatabase(`team2_${backend}`),
      );
      after(() => app.close());
      const name = `team2-${backend}`;
      const aliceDid = t.dids['alice.test']!;
      const url = `knotless://alice.test/${name}`;
      const web = `${app.url}/alice.test/${name}`;

      assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
      const wa = await newRepo(alice, url);
      await commitFiles(alice, wa, { 'seed.txt': 'seed\n' }, 'seed');
      await alice.ok(wa, 'push', '-q', 'origin', 'main');
      for (const m of ['bob.test', 'carol.test']) {
        const added = await alice.knotless('repo', 'maintainer', 'add', name, m);
        assert.equal(added.code, 0, added.stderr);
      }
      await waitFor(`${name} indexed with both maintainers`, async () =>
        (await app.index.maintainers(aliceDid, name)).length === 2 ? true : undefined,
      );
      const clone = async (user: typeof bob): Promise<string> => {
        const dir = user.dir();
        await user.ok(dir, 'clone', '-q', url, 'w');
        return `${dir}/w`;
      };
      const wb = await clone(bob);
      const wc = await clone(carolGit);

      /** What the CLI lists (git ls-remote through the helper), without HEAD. */
      const cliRefs = async (): Promise<Map<string, string>> => {
        const res = await alice.git(alice.dir(), 'ls-remote', url);
        assert.equal(res.code, 0, res.stderr);
        const refs = lsRemote(res.stdout);
        refs.delete('HEAD');
        return refs;
      };
      const xrpcRefs = async (nsid: string): Promise<Map<string, string | undefined>> => {
        const got = await xrpc<{ refs: RefView[] }>(app, nsid, { actor: 'alice.test', repo: name });
        return new Map(got.refs.filter((r) => r.ref !== 'HEAD').map((r) => [r.ref, r.target]));
      };
      const sorted = (m: Map<string, string | undefined>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));
      /** Every one of the appview's views shows exactly what the CLI lists; returns that listing. */
      const same = async (step: string): Promise<Map<string, string>> => {
        const cli = await cliRefs();
        await waitFor(`${step}: listRefs as the CLI lists`, async () =>
          JSON.stringify(sorted(await xrpcRefs('dev.knotless.listRefs'))) === JSON.stringify(sorted(cli))
            ? true
            : undefined,
        );
        assert.deepEqual(sorted(await xrpcRefs('dev.knotless.getRepo')), sorted(cli), `${step}: getRepo`);
        // A plain git clone of everything the appview advertises, once its mirror has caught up.
        await waitFor(`${step}: the appview's git advertisement`, async () => {
          const res = await alice.git(alice.dir(), 'ls-remote', web);
          if (res.code !== 0) return undefined;
          const adv = lsRemote(res.stdout);
          adv.delete('HEAD');
          return JSON.stringify(sorted(adv)) === JSON.stringify(sorted(cli)) ? true : undefined;
        });
        const dir = alice.dir();
        await alice.ok(dir, 'clone', '-q', '--mirror', web, 'm.git');
        const cloned = lsRemote(
          (await alice.ok(`${dir}/m.git`, 'for-each-ref', '--format=%(objectname)\t%(refname)')).replace(
            / /g,
            '\t',
          ),
        );
        assert.deepEqual(sorted(cloned), sorted(cli), `${step}: a plain git clone`);
        const diverged = [...cli.keys()].filter((r) => r.startsWith('refs/maintainers/'));
        const branches = (await get(`${web}/branches`)).text;
        const home = (await get(web)).text;
        for (const [ref, oid] of cli) {
          if (!ref.startsWith('refs/heads/')) continue;
          const b = ref.slice('refs/heads/'.length);
          assert.ok(
            branches.includes(`>${b}</a>`) && branches.includes(`title="${oid}"`),
            `${step}: ${ref} on the branches page`,
          );
        }
        assert.ok(
          home.includes(`title="${cli.get('refs/heads/main')!}"`),
          `${step}: main's head on the repository page`,
        );
        for (const page of [branches, home]) {
          assert.equal(
            page.includes('class="diverged"'),
            diverged.length > 0,
            `${step}: diverged named or not`,
          );
          for (const d of diverged) {
            const of = `refs/${d.split('/').slice(3).join('/')}`;
            assert.match(
              page,
              new RegExp(`diverged <code>${of}</code>: also\\s+<code>${d}</code>`),
              `${step}: ${d} named`,
            );
          }
        }
        return cli;
      };
      const pull = async (user: typeof bob, w: string) => {
        await user.ok(w, 'fetch', '-q', 'origin');
        await user.ok(w, 'merge', '-q', '--ff-only', 'origin/main');
      };

      await same('seeded');
      // The owner and both maintainers push main in turn, each a fast-forward of the one before.
      await pull(bob, wb);
      const b1 = await commitFiles(bob, wb, { 'b1.txt': 'bob\n' }, 'b1');
      await bob.ok(wb, 'push', '-q', 'origin', 'main');
      assert.equal((await same("bob's push")).get('refs/heads/main'), b1);
      await pull(carolGit, wc);
      const c1 = await commitFiles(carolGit, wc, { 'c1.txt': 'carol\n' }, 'c1');
      await carolGit.ok(wc, 'push', '-q', 'origin', 'main');
      assert.equal((await same("carol's push")).get('refs/heads/main'), c1);
      await pull(alice, wa);
      const a1 = await commitFiles(alice, wa, { 'a1.txt': 'alice\n' }, 'a1');
      await alice.ok(wa, 'push', '-q', 'origin', 'main');
      assert.equal((await same("alice's push")).get('refs/heads/main'), a1);

      // Bob and carol diverge on topic: carol listed it before bob's push landed, is refused after
      // her write, and is killed before she withdraws it.
      await alice.ok(wa, 'push', '-q', 'origin', 'main:refs/heads/topic');
      await same('topic made');
      for (const [user, w] of [
        [bob, wb],
        [carolGit, wc],
      ] as const) {
        await user.ok(w, 'fetch', '-q', 'origin');
        await user.ok(w, 'checkout', '-q', '-b', 'topic', 'origin/topic');
      }
      const bt = await commitFiles(bob, wb, { 'bt.txt': 'bob topic\n' }, 'bt');
      const ct = await commitFiles(carolGit, wc, { 'ct.txt': 'carol topic\n' }, 'ct');
      extra['carol'] = { KNOTLESS_CRASH_AT: 'push:before-withdraw' };
      let bobPush: Run | undefined;
      const killed = await heldPush(
        wc,
        () => carolGit.git(wc, 'push', 'origin', 'topic'),
        async () => {
          bobPush = await bob.git(wb, 'push', 'origin', 'topic');
        },
      );
      extra['carol'] = {};
      assert.equal(bobPush!.code, 0, bobPush!.stderr);
      assert.notEqual(killed.code, 0, killed.stderr);
      const bobFirst =
        Buffer.compare(Buffer.from(t.dids['bob.test']!), Buffer.from(t.dids['carol.test']!)) < 0;
      const [shown, apart] = bobFirst ? [bt, ['carol.test', ct]] : [ct, ['bob.test', bt]];
      const split = await same('diverged');
      assert.equal(split.get('refs/heads/topic'), shown);
      assert.equal(
        split.get(`refs/maintainers/${apart[0]}/heads/topic`),
        apart[1],
        'the other value, named by who wrote it',
      );

      // Bob's next push contains both values and ends the divergence.
      await bob.ok(
        wb,
        'fetch',
        '-q',
        'origin',
        '+refs/heads/*:refs/remotes/origin/*',
        '+refs/maintainers/*:refs/remotes/team/*',
      );
      await bob.ok(wb, 'merge', '-q', '--no-edit', ct);
      await bob.ok(wb, 'push', '-q', 'origin', 'topic');
      const ended = await same('ended');
      assert.ok(![...ended.keys()].some((r) => r.startsWith('refs/maintainers/')), 'nothing listed apart');
      assert.equal(ended.get('refs/heads/topic'), (await bob.ok(wb, 'rev-parse', 'HEAD')).trim());
    });
  }
});
