// Two maintainers of one repository on the network's two PDSes (bob on the second, carol on the
// first; the owner, alice, does not push) race pushes to one branch, round after round (format.md,
// "Teams"): divergent commits from the same base, and a fast-forward racing the commit it builds on.
// Once with each racer's helper doing the work itself, once with each racer's pushes handed to its
// own warm agent (proved: every request of the racer's pushes reached its PDS from the agent's
// process). After every round: no acknowledged commit is unreachable from what a reader lists, never
// two `ok` for divergent values, a refused racer's value withdrawn (nothing left under
// refs/maintainers/), and three readers on three machines list the same refs, `repo info` counting
// them. KNOTLESS_RACE_ROUNDS sets the rounds per run (the bench in performance.md runs 50); the
// figures of a run are printed as a test diagnostic.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
/** Per racer, the environment of the run under way (empty: the helper works alone). */
const through: Record<'bob' | 'carol', Record<string, string>> = { bob: {}, carol: {} };
// Repositories start on ref records (KNOTLESS_REF_TABLE=0): alice's table naming the maintainers is
// written by hand from them.
const env = () => ({ KNOTLESS_REF_TABLE: '0', KNOTLESS_COMPACT: '0' });
const alice = useGitUser(t, 'alice.test', env);
const bob = useGitUser(t, 'bob.test', () => ({ ...env(), ...through.bob }));
const carol = useGitUser(t, 'carol.test', () => ({ ...env(), ...through.carol }));

/** Rounds of racing per run: even ones divergent, odd ones a fast-forward racing its base. */
const ROUNDS = Number(process.env['KNOTLESS_RACE_ROUNDS'] ?? '6');
assert.ok(Number.isInteger(ROUNDS) && ROUNDS >= 2, 'KNOTLESS_RACE_ROUNDS is a whole number of at least 2');

async function ls(user: GitUser, url: string): Promise<Map<string, string>> {
  const res = await user.git(user.dir(), 'ls-remote', url);
  assert.equal(res.code, 0, res.stderr);
  return lsRemote(res.stdout);
}

/** A racer's warm agent and the proxy in front of its PDS that tells whose process sent each request. */
interface Warm {
  agent: RunningAgent;
  proxy: Proxy;
}

const warm: Partial<Record<'bob' | 'carol', Warm>> = {};

before(async () => {
  await t.ready;
  assert.notEqual(t.pdsOf['bob.test'], t.pdsOf['carol.test'], 'the racers are on two PDSes');
});

/** Starts `who`'s agent behind a proxy: requests for the others' accounts routed to their PDSes. */
async function startWarm(who: 'bob' | 'carol'): Promise<Warm> {
  const handle = `${who}.test`;
  const routes = Object.fromEntries(
    Object.keys(t.dids)
      .filter((h) => h !== handle)
      .map((h) => [t.dids[h]!, t.pdsOf[h]!]),
  );
  const pids: number[] = [];
  const proxy = await startProxy({
    target: t.pdsOf[handle]!,
    routes,
    watchPids: () => pids,
  });
  const socket = path.join(t.tmpdir(), 'agent.sock');
  const agent = await spawnAgent(socket, { ...t.env(), KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: proxy.url });
  pids.push(agent.child.pid!);
  through[who] = { KNOTLESS_SERVICE: proxy.url, KNOTLESS_AGENT_SOCKET: socket };
  return { agent, proxy };
}

/** Figures of one run. */
interface Run {
  rounds: number;
  acked: number;
  refused: number;
  lost: number;
  bothOk: number;
  ms: number;
}

/**
 * One run of racing rounds on a new repository `name`; `sealed`: a private one, whose records and
 * tables are sealed (naming the maintainers shares it with them and moves it onto its table).
 */
async function race(name: string, agents: boolean, sealed = false): Promise<Run> {
  assert.equal((await alice.knotless('repo', 'create', name, ...(sealed ? ['--private'] : []))).code, 0);
  const url = `knotless://alice.test/${name}`;
  const seed = await newRepo(alice, url);
  const first = await commitFiles(alice, seed, { 'f.txt': 'seed\n' }, 'seed');
  await alice.ok(seed, 'push', '-q', 'origin', 'main');
  if (sealed) for (const u of [bob, carol]) assert.equal((await u.knotless('key', 'list')).code, 0);
  else {
    const packs = (await tableHands(t, 'alice.test').refRecords(name)).get('refs/heads/main')!.packs;
    await tableHands(t, 'alice.test').writeTable(name, [{ ref: 'refs/heads/main', target: first, packs }]);
  }
  for (const m of ['bob.test', 'carol.test']) {
    const added = await alice.knotless('repo', 'maintainer', 'add', name, m);
    assert.equal(added.code, 0, added.stderr);
  }

  const dirs = { alice: alice.dir(), bob: bob.dir(), carol: carol.dir() };
  await alice.ok(dirs.alice, 'clone', '-q', url, 'w');
  await bob.ok(dirs.bob, 'clone', '-q', url, 'w');
  await carol.ok(dirs.carol, 'clone', '-q', url, 'w');
  const wa = `${dirs.alice}/w`;
  const wb = `${dirs.bob}/w`;
  const wc = `${dirs.carol}/w`;
  const acked: string[] = [];
  const refusals: string[] = [];
  const run: Run = { rounds: ROUNDS, acked: 0, refused: 0, lost: 0, bothOk: 0, ms: 0 };
  const started = performance.now();
  let before = first;

  for (let round = 0; round < ROUNDS; round++) {
    for (const [user, w] of [
      [bob, wb],
      [carol, wc],
    ] as const) {
      await user.ok(w, 'fetch', '-q', 'origin');
      await user.ok(w, 'reset', '-q', '--hard', 'origin/main');
    }
    const b = await commitFiles(bob, wb, { [`b${round}.txt`]: `bob ${round}\n` }, `bob ${round}`);
    let c: string;
    if (round % 2 === 0) {
      c = await commitFiles(carol, wc, { [`c${round}.txt`]: `carol ${round}\n` }, `carol ${round}`);
    } else {
      // Carol builds on bob's commit before it is pushed: her push contains his.
      await bob.ok(wb, 'push', '-q', wc, '+main:refs/remotes/bob/main');
      await carol.ok(wc, 'reset', '-q', '--hard', 'bob/main');
      c = await commitFiles(carol, wc, { [`c${round}.txt`]: `carol ${round}\n` }, `carol ${round}`);
    }
    for (const w of Object.values(warm)) w.proxy.reset();
    const [pb, pc] = await Promise.all([
      bob.git(wb, 'push', 'origin', 'main'),
      carol.git(wc, 'push', 'origin', 'main'),
    ]);
    for (const p of [pb, pc])
      if (p.code !== 0) {
        run.refused++;
        refusals.push(p.stderr);
        assert.match(p.stderr, /! \[(rejected|remote rejected)\] +main -> main \(fetch first\)/, p.stderr);
      }
    if (pb.code === 0) acked.push(b);
    if (pc.code === 0) acked.push(c);
    if (agents)
      for (const [who, p] of [
        ['bob', pb],
        ['carol', pc],
      ] as const) {
        // The agent carried the racer's push: every request of it came from the agent's process,
        // an acknowledged one's table write among them.
        const { proxy, agent } = warm[who]!;
        const why = `round ${round}, ${who}: ${JSON.stringify(proxy.requests.map((r) => [r.nsid, r.pid]))}`;
        assert.ok(proxy.requests.length > 0, why);
        // Every write, and every request whose sender the proxy could name, came from the agent. (A
        // read the proxy could not attribute to any watched process under load is left unnamed.)
        for (const r of proxy.requests)
          if (r.nsid === 'com.atproto.repo.putRecord' || r.pid !== undefined)
            assert.equal(r.pid, agent.child.pid, `not carried by the agent: ${why}`);
        if (p.code === 0) assert.ok(proxy.count('com.atproto.repo.putRecord') >= 1, why);
      }
    if (pb.code === 0 && pc.code === 0) {
      run.bothOk++;
      // Two `ok` only for values one of which contains the other.
      const contains =
        (await carol.git(wc, 'merge-base', '--is-ancestor', b, c)).code === 0 ||
        (await bob.git(wb, 'merge-base', '--is-ancestor', c, b)).code === 0;
      assert.ok(contains, `round ${round}: two ok for divergent ${b} and ${c}`);
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
    const info = await alice.knotless('repo', 'info', `alice.test/${name}`, '--json');
    assert.equal(info.code, 0, info.stderr);
    assert.equal(
      (JSON.parse(info.stdout) as { refs: number }).refs,
      la.size - 1,
      'repo info counts the same refs',
    );
    // Every acknowledged commit is reachable from what the readers list.
    await alice.ok(wa, 'fetch', '-q', 'origin');
    const main = la.get('refs/heads/main')!;
    // The value is the one acknowledged (the one containing the other, when both were), and nothing
    // moved when both were refused.
    const expected = pc.code === 0 ? c : pb.code === 0 ? b : before;
    assert.equal(main, expected, `round ${round}: bob ${pb.code}, carol ${pc.code}`);
    before = main;
    assert.equal((await alice.ok(wa, 'rev-parse', 'origin/main')).trim(), main);
    for (const x of acked)
      if ((await alice.git(wa, 'merge-base', '--is-ancestor', x, main)).code !== 0) run.lost++;
    assert.equal(run.lost, 0, `round ${round}: an acknowledged commit is lost`);
  }
  run.ms = performance.now() - started;
  run.acked = acked.length;
  // The test saw races: every divergent round refuses at least one push.
  assert.ok(run.refused >= Math.ceil(ROUNDS / 2), `${run.refused} refusals`);
  // Pushes that race no one are acknowledged, one after the other, each containing all before.
  for (const [user, w, who] of [
    [bob, wb, 'bob'],
    [carol, wc, 'carol'],
  ] as const) {
    await user.ok(w, 'fetch', '-q', 'origin');
    await user.ok(w, 'reset', '-q', '--hard', 'origin/main');
    const x = await commitFiles(user, w, { [`${who}.txt`]: `${who} alone\n` }, `${who} alone`);
    const p = await user.git(w, 'push', 'origin', 'main');
    assert.equal(p.code, 0, `${p.stderr}\nrefused in the race:\n${refusals.join('\n')}`);
    acked.push(x);
    assert.equal((await ls(alice, url)).get('refs/heads/main'), x);
  }
  await alice.ok(wa, 'fetch', '-q', 'origin');
  for (const x of acked)
    assert.equal((await alice.git(wa, 'merge-base', '--is-ancestor', x, 'origin/main')).code, 0, `${x} lost`);
  return run;
}

function say(ctx: { diagnostic: (m: string) => void }, mode: string, r: Run): void {
  ctx.diagnostic(
    `${mode}: ${r.rounds} rounds, ${r.acked} pushes acknowledged, ${r.refused} refused, lost ${r.lost}, ` +
      `${r.bothOk} rounds with two ok (one containing the other), ${(r.ms / r.rounds / 1000).toFixed(1)} s a round`,
  );
}

describe('two maintainers racing on one branch', () => {
  // Before the network stops: a running agent holds its PDSes' event streams open.
  after(async () => {
    for (const w of Object.values(warm)) {
      await w.agent.stop();
      await w.proxy.close();
    }
  });

  it(`loses no acknowledged commit and never acknowledges two divergent values (${ROUNDS} rounds)`, async (ctx) => {
    await t.ready;
    say(ctx, 'without agents', await race('race', false));
  });

  it(`does the same on a private repository, every table sealed (${ROUNDS} rounds)`, async (ctx) => {
    await t.ready;
    say(ctx, 'private', await race('race-sealed', false, true));
  });

  it(`does the same with each racer's pushes carried by its own warm agent (${ROUNDS} rounds)`, async (ctx) => {
    await t.ready;
    warm.bob = await startWarm('bob');
    warm.carol = await startWarm('carol');
    say(ctx, 'with agents', await race('race-warm', true));
  });
});
