// Two writers of one repository on the network's two PDSes (the owner, alice, and a maintainer, bob)
// race pushes to one branch, round after round (format.md, "Teams"): divergent commits from the same
// base, and a fast-forward racing the commit it builds on. After every round: no acknowledged commit
// is unreachable from what a reader lists, never two `ok` for divergent values, a refused racer's
// value withdrawn (nothing left under refs/maintainers/), and three readers on three machines list
// the same refs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
const env = () => ({ KNOTLESS_COMPACT: '0' });
const alice = useGitUser(t, 'alice.test', env);
const bob = useGitUser(t, 'bob.test', env);
const carol = useGitUser(t, 'carol.test', env);

/** Rounds of racing: even ones divergent, odd ones a fast-forward racing its base. */
const ROUNDS = 4;

async function ls(user: GitUser, url: string): Promise<Map<string, string>> {
  const res = await user.git(user.dir(), 'ls-remote', url);
  assert.equal(res.code, 0, res.stderr);
  return lsRemote(res.stdout);
}

describe('two writers racing on one branch', () => {
  it(`loses no acknowledged commit and never acknowledges two divergent values (${ROUNDS} rounds)`, async () => {
    await t.ready;
    const name = 'race';
    assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
    const url = `knotless://alice.test/${name}`;
    const seed = await newRepo(alice, url);
    const first = await commitFiles(alice, seed, { 'f.txt': 'seed\n' }, 'seed');
    await alice.ok(seed, 'push', '-q', 'origin', 'main');
    const packs = (await tableHands(t, 'alice.test').refRecords(name)).get('refs/heads/main')!.packs;
    await tableHands(t, 'alice.test').writeTable(name, [{ ref: 'refs/heads/main', target: first, packs }]);
    const added = await alice.knotless('repo', 'maintainer', 'add', name, 'bob.test');
    assert.equal(added.code, 0, added.stderr);

    const dirs = { alice: alice.dir(), bob: bob.dir(), carol: carol.dir() };
    await alice.ok(dirs.alice, 'clone', '-q', url, 'w');
    await bob.ok(dirs.bob, 'clone', '-q', url, 'w');
    await carol.ok(dirs.carol, 'clone', '-q', url, 'w');
    const wa = `${dirs.alice}/w`;
    const wb = `${dirs.bob}/w`;
    const wc = `${dirs.carol}/w`;
    const acked: string[] = [];
    let bothOk = 0;
    let refusals = 0;

    for (let round = 0; round < ROUNDS; round++) {
      for (const [user, w] of [
        [alice, wa],
        [bob, wb],
      ] as const) {
        await user.ok(w, 'fetch', '-q', 'origin');
        await user.ok(w, 'reset', '-q', '--hard', 'origin/main');
      }
      const a = await commitFiles(alice, wa, { [`a${round}.txt`]: `alice ${round}\n` }, `alice ${round}`);
      let b: string;
      if (round % 2 === 0) {
        b = await commitFiles(bob, wb, { [`b${round}.txt`]: `bob ${round}\n` }, `bob ${round}`);
      } else {
        // Bob builds on alice's commit before it is pushed: his push contains hers.
        await alice.ok(wa, 'push', '-q', wb, '+main:refs/remotes/alice/main');
        await bob.ok(wb, 'reset', '-q', '--hard', 'alice/main');
        b = await commitFiles(bob, wb, { [`b${round}.txt`]: `bob ${round}\n` }, `bob ${round}`);
      }
      const [pa, pb] = await Promise.all([
        alice.git(wa, 'push', 'origin', 'main'),
        bob.git(wb, 'push', 'origin', 'main'),
      ]);
      for (const p of [pa, pb])
        if (p.code !== 0) {
          refusals++;
          assert.match(
            p.stderr,
            /! \[(rejected|remote rejected)\] +main -> main \((fetch first|non-fast-forward)\)/,
            p.stderr,
          );
        }
      if (pa.code === 0) acked.push(a);
      if (pb.code === 0) acked.push(b);
      if (pa.code === 0 && pb.code === 0) {
        bothOk++;
        // Two `ok` only for values one of which contains the other.
        const contains =
          (await bob.git(wb, 'merge-base', '--is-ancestor', a, b)).code === 0 ||
          (await alice.git(wa, 'merge-base', '--is-ancestor', b, a)).code === 0;
        assert.ok(contains, `round ${round}: two ok for divergent ${a} and ${b}`);
      }

      // Every reader, on its own machine, lists the same refs; no refused value is left listed.
      const [la, lb, lc] = await Promise.all([ls(alice, url), ls(bob, url), ls(carol, url)]);
      assert.deepEqual(lb, la, `round ${round}: bob and alice list the same`);
      assert.deepEqual(lc, la, `round ${round}: carol and alice list the same`);
      assert.deepEqual(
        [...la.keys()].filter((r) => r.startsWith('refs/maintainers/')),
        [],
        `round ${round}`,
      );
      const info = await carol.knotless('repo', 'info', `alice.test/${name}`, '--json');
      assert.equal(info.code, 0, info.stderr);
      assert.equal(
        (JSON.parse(info.stdout) as { refs: number }).refs,
        la.size - 1,
        'repo info counts the same refs',
      );
      // Every acknowledged commit is reachable from what the readers list.
      await carol.ok(wc, 'fetch', '-q', 'origin');
      const main = la.get('refs/heads/main')!;
      assert.equal((await carol.ok(wc, 'rev-parse', 'origin/main')).trim(), main);
      for (const c of acked)
        assert.equal(
          (await carol.git(wc, 'merge-base', '--is-ancestor', c, main)).code,
          0,
          `round ${round}: ${c} lost`,
        );
    }
    // The test saw races: at least one push was refused (a divergent round cannot acknowledge both).
    assert.ok(refusals >= ROUNDS / 2, `${refusals} refusals`);
    assert.ok(acked.length >= 1);
    void bothOk;
  });
});
