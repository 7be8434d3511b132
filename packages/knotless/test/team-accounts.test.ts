// A maintainer's account changing under a team repository (format.md, "Teams"; the owner alice on the
// network's first PDS, the maintainer bob on its second): deactivated, the repository is read from
// the others with one warning naming him, a push that cannot be judged against his table is refused
// with nothing written, and once he is active again everything he pushed is listed as before; moved
// to another PDS, every reader follows him there, his packs included, and his next push lands once
// he logs in again there. And a cycle of forks (each repository's record naming the other as its
// original, as any account can write): nothing follows forks further than one step, so nothing loops.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { knotless } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test'], { pdses: 2 });
const env = () => ({ KNOTLESS_COMPACT: '0' });
const alice = useGitUser(t, 'alice.test', env);
const bob = useGitUser(t, 'bob.test', env);
const carol = useGitUser(t, 'carol.test', env);

before(async () => {
  await t.ready;
  await Promise.all([alice.ready, bob.ready, carol.ready]);
  assert.notEqual(t.pdsOf['alice.test'], t.pdsOf['bob.test'], 'the maintainer is on another PDS');
});

/** `knotless dev <args>` on the test network, as from a dev network's shell. */
async function dev(...args: string[]): Promise<string> {
  const res = await knotless(['dev', ...args, '--dir', t.net.dir], {
    env: { ...t.env(), KNOTLESS_DEV_PASSWORD: t.password },
  });
  assert.equal(res.code, 0, res.stderr);
  return res.stdout;
}

async function listed(user: GitUser, url: string): Promise<{ refs: Map<string, string>; stderr: string }> {
  const ls = await user.git(user.dir(), 'ls-remote', url);
  assert.equal(ls.code, 0, ls.stderr);
  return { refs: lsRemote(ls.stdout), stderr: ls.stderr };
}

/** Alice's `name` with bob its maintainer, main at bob's commit on alice's first; their work trees. */
async function team(
  name: string,
): Promise<{ url: string; first: string; bobs: string; wa: string; wb: string }> {
  assert.equal((await alice.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const wa = await newRepo(alice, url);
  const first = await commitFiles(alice, wa, { 'a.txt': 'first\n' }, 'first');
  await alice.ok(wa, 'push', '-q', 'origin', 'main');
  const added = await alice.knotless('repo', 'maintainer', 'add', name, 'bob.test');
  assert.equal(added.code, 0, added.stderr);
  const dir = bob.dir();
  await bob.ok(dir, 'clone', '-q', url, 'w');
  const wb = `${dir}/w`;
  const bobs = await commitFiles(bob, wb, { 'b.txt': 'bob\n'.repeat(20_000) }, 'bob');
  await bob.ok(wb, 'push', '-q', 'origin', 'main');
  assert.equal((await listed(carol, url)).refs.get('refs/heads/main'), bobs);
  return { url, first, bobs, wa, wb };
}

describe('a team repository under bad input', () => {
  it('its maintainer deactivated: read from the others in one warning, pushes refused with nothing written, all back once active', async () => {
    const r = await team('while-away');
    await dev('account', 'bob.test', 'deactivate');
    try {
      const ls = await listed(carol, r.url);
      const warned = ls.stderr.split('\n').filter((l) => l.includes(t.dids['bob.test']!));
      assert.equal(warned.length, 1, ls.stderr);
      assert.match(
        warned[0]!,
        /^knotless: warning: the refs maintainer did:plc:[a-z0-9]+ pushed to alice\.test\/while-away could not be read \(.+\); the repository is read from the others$/,
      );
      // Without his table, the rule computes main from alice's alone.
      assert.equal(ls.refs.get('refs/heads/main'), r.first);
      // Alice's push on top of bob's commit cannot be judged against his table: refused, nothing written.
      await alice.ok(r.wa, 'pull', '-q', r.wb, 'main');
      const hers = await commitFiles(alice, r.wa, { 'c.txt': 'alice\n' }, 'alice while bob is away');
      const push = await alice.git(r.wa, 'push', 'origin', 'main');
      assert.notEqual(push.code, 0, push.stderr);
      assert.match(push.stderr, new RegExp(t.dids['bob.test']!));
      assert.notEqual((await listed(carol, r.url)).refs.get('refs/heads/main'), hers);
    } finally {
      await dev('account', 'bob.test', 'activate');
    }
    const back = await listed(carol, r.url);
    assert.equal(back.refs.get('refs/heads/main'), r.bobs);
    assert.doesNotMatch(back.stderr, /could not be read/);
  });

  it('in a cycle of forks (each repository naming the other as its original), nothing loops', async () => {
    const r = await team('loop');
    const forked = await bob.knotless('repo', 'fork', 'alice.test/loop', '--json');
    assert.equal(forked.code, 0, forked.stderr);
    // Alice's record now names bob's fork as its original: a cycle, as any account can write one.
    const hands = tableHands(t, 'alice.test');
    const uri = (h: string) => `at://${t.dids[h]!}/dev.knotless.repo/loop`;
    const res = await fetch(
      `${t.pdsOf['alice.test']}/xrpc/com.atproto.repo.getRecord?repo=${t.dids['alice.test']}&collection=dev.knotless.repo&rkey=loop`,
    );
    const record = ((await res.json()) as { value: Record<string, unknown> }).value;
    await hands.put('dev.knotless.repo', 'loop', { ...record, forkOf: uri('bob.test') });
    for (const [who, h] of [
      ['alice', 'bob.test'],
      ['bob', 'alice.test'],
    ] as const) {
      const info = await carol.knotless('repo', 'info', `${who}.test/loop`, '--json');
      assert.equal(info.code, 0, info.stderr);
      assert.equal((JSON.parse(info.stdout) as { forkOf?: string }).forkOf, uri(h));
    }
    // Forked again, a pull request from the fork to each, and the team's refs read as before.
    assert.equal((await carol.knotless('repo', 'fork', 'bob.test/loop')).code, 0);
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', 'knotless://carol.test/loop', 'c');
    await carol.ok(`${dir}/c`, 'switch', '-q', '-c', 'fix');
    await commitFiles(carol, `${dir}/c`, { 'fix.txt': 'fix\n' }, 'fix');
    await carol.ok(`${dir}/c`, 'push', '-q', 'origin', 'fix');
    for (const base of ['alice.test/loop', 'bob.test/loop']) {
      const pr = await carol.knotless('pr', 'create', base, '--head', 'loop:fix', '--title', 'fix');
      assert.equal(pr.code, 0, `${base}: ${pr.stderr}`);
    }
    assert.equal((await listed(carol, r.url)).refs.get('refs/heads/main'), r.bobs);
  });

  it('its maintainer moved to another PDS: every reader follows him there, packs and all, and his next push lands', async () => {
    const r = await team('moving');
    const from = t.pdsOf['bob.test']!;
    const out = await dev('migrate', 'bob.test');
    const to = t.net.pdses.find((p) => p.url !== from)!.url;
    assert.match(out, new RegExp(`bob\\.test now lives on ${to.replace(/[.:/]/g, '\\$&')}`));
    // Carol's machine knew bob on his old PDS: she reads his table, and his packs, where he is now.
    const ls = await listed(carol, r.url);
    assert.equal(ls.refs.get('refs/heads/main'), r.bobs);
    assert.doesNotMatch(ls.stderr, /could not be read/);
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', r.url, 'c');
    assert.equal((await carol.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), r.bobs);
    await carol.ok(`${dir}/c`, 'fsck', '--strict');
    // Bob's session is his old PDS's: his push says so in one sentence, writing nothing; logged in
    // again, it lands on his new PDS, and every reader lists it.
    const next = await commitFiles(bob, r.wb, { 'd.txt': 'bob, moved\n' }, 'bob, moved');
    const stale = await bob.git(r.wb, 'push', 'origin', 'main');
    assert.notEqual(stale.code, 0);
    assert.match(
      stale.stderr,
      /^knotless: bob\.test moved from \S+ to \S+ since you logged in; log in again there with `knotless login bob\.test`\.$/m,
    );
    assert.equal((await listed(carol, r.url)).refs.get('refs/heads/main'), r.bobs);
    assert.equal((await bob.knotless('login', 'bob.test', '--app-password', t.password)).code, 0);
    const push = await bob.git(r.wb, 'push', 'origin', 'main');
    assert.equal(push.code, 0, push.stderr);
    for (const reader of [alice, carol])
      assert.equal((await listed(reader, r.url)).refs.get('refs/heads/main'), next);
  });
});
