// What the appview tells of a team's writes (format.md, "Teams"; appview.md, "Webhooks"): pushes and
// push webhooks follow the team's refs as the rule computes them, not each table write, so a
// maintainer's value that diverged (listed apart as refs/maintainers/<handle>/…, e.g. a refused
// racer that died before withdrawing) moves no branch and sends nothing, the push that ends it
// sends one, and an owner's write that only catches up with the team's value sends nothing; a
// maintainer's table that breaks a rule is left out with one log line naming whose table, of which
// repository, and why, once per record version however often it is read. On a dev network of two
// PDSes (alice, the owner, on one; bob, her maintainer, on the other), with a receiver of its own.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { commitFiles, useGitUser } from '../../knotless/test/helpers/git.ts';
import { useNetwork } from '../../knotless/test/helpers/network.ts';
import { tableHands } from '../../knotless/test/helpers/ref-table.ts';
import { appviewOn, get, maintainedRepo, waitFor, xrpc } from './helpers.ts';
import { startReceiver } from './webhook-receiver.ts';

const t = useNetwork(['alice.test', 'bob.test'], { pdses: 2 });
const env = () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_REF_TABLE: '1' });
const alice = useGitUser(t, 'alice.test', env);
const aliceHands = tableHands(t, 'alice.test');
const bobHands = tableHands(t, 'bob.test');

before(async () => {
  await t.ready;
  assert.notEqual(t.pdsOf['alice.test'], t.pdsOf['bob.test'], "bob's refs live on another PDS");
});

interface PushEvent {
  ref?: string;
  before?: string | null;
  after?: string | null;
  pusher?: { did: string };
}

describe("the appview's events of a team's writes", () => {
  it('sends a push webhook for what moves the team’s refs, never for a diverged value, and once for the push that ends it', async () => {
    const lines: string[] = [];
    const app = await appviewOn(t, ':memory:', undefined, {}, (l) => lines.push(l));
    after(() => app.close());
    const rx = await startReceiver();
    after(() => rx.close());
    const name = 'team-events';
    const aliceDid = t.dids['alice.test']!;
    const bobDid = t.dids['bob.test']!;

    // Two more commits of the repository's own, pushed before bob is named: bob's diverged value,
    // and the one that contains it.
    let x = '';
    let m = '';
    const { first } = await maintainedRepo(
      app,
      { user: alice, handle: 'alice.test' },
      name,
      'bob.test',
      async (work) => {
        x = await commitFiles(alice, work, { 'x.txt': 'x\n' }, 'x');
        m = await commitFiles(alice, work, { 'm.txt': 'm\n' }, 'm');
        await alice.ok(work, 'push', '-q', 'origin', `${x}:refs/heads/x`, `${m}:refs/heads/m`);
      },
    );
    await app.index.webhooks.add(aliceDid, name, rx.url);

    const listed = async (): Promise<Map<string, string | undefined>> => {
      const got = await xrpc<{ refs: { ref: string; target?: string }[] }>(app, 'dev.knotless.listRefs', {
        actor: 'alice.test',
        repo: name,
      });
      return new Map(got.refs.map((r) => [r.ref, r.target]));
    };
    // The deliveries queued for main, read from the queue itself: a delivery is queued in the
    // transaction that indexes the write, so once the listing shows the write, its events are there.
    const queuedForMain = async (): Promise<PushEvent[]> => {
      const rows = await app.index.db
        .selectFrom('webhook_deliveries')
        .select(['event', 'payload'])
        .where('event', '=', 'push')
        .execute();
      return rows.map((r) => JSON.parse(r.payload) as PushEvent).filter((e) => e.ref === 'refs/heads/main');
    };
    const pushesOfMain = async () =>
      (
        await xrpc<{ pushes: { ref: string; after?: string; pusher?: string }[] }>(
          app,
          'dev.knotless.listPushes',
          { actor: 'alice.test', repo: name },
        )
      ).pushes.filter((p) => p.ref === 'refs/heads/main');
    const mainPushesBefore = (await pushesOfMain()).length;

    // Bob's value of main, written over nothing of alice's: it diverges, and is listed apart.
    await bobHands.writeMemberTable(aliceDid, name, [
      { ref: 'refs/heads/main', target: x, packs: [], over: [] },
    ]);
    const diverged = await waitFor("bob's diverged main listed apart", async () => {
      const refs = await listed();
      return refs.get('refs/maintainers/bob.test/heads/main') === x ? refs : undefined;
    });
    assert.equal(diverged.get('refs/heads/main'), first, "the team's main did not move");
    assert.deepEqual(await queuedForMain(), [], 'no push event for a branch that did not move');
    assert.equal((await pushesOfMain()).length, mainPushesBefore, 'no push noted for it either');

    // Bob's next write contains both values (its `over` names alice's): the divergence ends, and
    // main moves once, by bob.
    await bobHands.writeMemberTable(aliceDid, name, [
      { ref: 'refs/heads/main', target: m, packs: [], over: [{ did: aliceDid, target: first }] },
    ]);
    await waitFor('main moved to the value that ends the divergence', async () => {
      const refs = await listed();
      return refs.get('refs/heads/main') === m && !refs.has('refs/maintainers/bob.test/heads/main')
        ? true
        : undefined;
    });
    const queued = await queuedForMain();
    assert.deepEqual(
      queued.map((e) => [e.before, e.after, e.pusher?.did]),
      [[first, m, bobDid]],
      'one push event for main, by bob',
    );
    const delivered = await waitFor('the push delivered', () =>
      Promise.resolve(
        rx.received.map((r) => JSON.parse(r.body) as PushEvent).find((e) => e.ref === 'refs/heads/main'),
      ),
    );
    assert.deepEqual([delivered.before, delivered.after, delivered.pusher?.did], [first, m, bobDid]);

    // Alice catches her own table up with the team's value: nothing moved for any reader.
    const held = await aliceHands.readTable(name);
    assert.ok(held !== undefined);
    await aliceHands.writeTable(
      name,
      [{ ref: 'refs/heads/main', target: m, packs: [], over: [{ did: bobDid, target: m }] }],
      [bobDid],
      held.value,
    );
    await waitFor("alice's table with main at m indexed", async () => {
      const row = await app.index.db
        .selectFrom('table_refs')
        .select('target')
        .where('did', '=', aliceDid)
        .where('repo', '=', name)
        .where('ref', '=', 'refs/heads/main')
        .executeTakeFirst();
      return row?.target === m ? true : undefined;
    });
    assert.equal((await queuedForMain()).length, 1, "alice's catching up sends nothing");
    assert.equal((await listed()).get('refs/heads/main'), m);
    assert.equal(
      lines.filter((l) => l.includes('breaks a rule')).length,
      0,
      'no table of this repository broke a rule',
    );
  });

  it("logs a maintainer's table that breaks a rule once per version, with whose and which repository", async () => {
    const lines: string[] = [];
    const app = await appviewOn(t, ':memory:', undefined, {}, (l) => lines.push(l));
    after(() => app.close());
    const name = 'team-bad-table';
    const aliceDid = t.dids['alice.test']!;
    const bobDid = t.dids['bob.test']!;
    const { first } = await maintainedRepo(app, { user: alice, handle: 'alice.test' }, name, 'bob.test');

    // Bob's table under this repository's key names another repository: a rule broken.
    const bad = (line: string) => line.includes('breaks a rule');
    await bobHands.writeMemberTable(
      aliceDid,
      name,
      [{ ref: 'refs/heads/bad', target: first, packs: [], over: [{ did: aliceDid }] }],
      `at://${aliceDid}/dev.knotless.repo/elsewhere`,
    );
    const line = await waitFor("the bad table's log line", () => Promise.resolve(lines.find(bad)));
    assert.match(
      line,
      new RegExp(`the ref table maintainer ${bobDid} wrote for ${aliceDid}/${name} breaks a rule`),
    );
    assert.match(line, / account=did:plc:\S+ repo=\S+$/);
    assert.ok(line.includes(` account=${bobDid} `) && line.endsWith(` repo=${aliceDid}/${name}`), line);

    // Read many times, and the account read again whole (the same version under a later revision):
    // still one line; the table counts for nothing.
    for (let i = 0; i < 3; i++) {
      const refs = await xrpc<{ refs: { ref: string }[] }>(app, 'dev.knotless.listRefs', {
        actor: 'alice.test',
        repo: name,
      });
      assert.ok(!refs.refs.some((r) => r.ref.includes('bad')));
      assert.equal((await get(`${app.url}/alice.test/${name}/branches`)).status, 200);
    }
    const readsBefore = app.resync.accountsRead;
    app.resync.recheck(bobDid);
    await waitFor("bob's account read again", () =>
      Promise.resolve(app.resync.accountsRead > readsBefore ? true : undefined),
    );
    await app.resync.idle();
    assert.equal(lines.filter(bad).length, 1, lines.filter(bad).join('\n'));

    // A new bad version is said again, once.
    await bobHands.writeMemberTable(
      aliceDid,
      name,
      [{ ref: 'refs/heads/bad2', target: first, packs: [], over: [{ did: aliceDid }] }],
      `at://${aliceDid}/dev.knotless.repo/elsewhere`,
    );
    await waitFor('the second version said', () =>
      Promise.resolve(lines.filter(bad).length === 2 ? true : undefined),
    );
    assert.equal(lines.filter(bad).length, 2);
  });
});
