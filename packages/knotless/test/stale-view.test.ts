import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// Two machines of one account, each with its own cache. `a` asks for the ten-minute listing window
// that once answered git from a cached view `b` had made stale; a push now always lists first, so
// git decides on what the remote holds, and compare-and-swap still guards the moment after.
const t = useNetwork(['alice.test']);
const a = useGitUser(t, 'alice.test', () => ({ KNOTLESS_LIST_WINDOW: '600', KNOTLESS_COMPACT: '0' }));
const b = useGitUser(t, 'alice.test', () => ({ KNOTLESS_LIST_WINDOW: '0', KNOTLESS_COMPACT: '0' }));

let n = 0;
/** A repository where `a` pushed main (and `side`) and `b` then moved both; `a`'s view is stale. */
async function staleSetup(): Promise<{ url: string; ad: string; bd: string; x: string }> {
  const name = `stale-${++n}`;
  assert.equal((await a.knotless('repo', 'create', name)).code, 0);
  const url = `knotless://alice.test/${name}`;
  const ad = await newRepo(a, url);
  const x = await commitFiles(a, ad, { f: 'x' }, 'x');
  await a.ok(ad, 'push', 'origin', 'main', 'main:side');
  const out = b.dir();
  await b.ok(out, 'clone', '-q', url, 'c');
  const bd = `${out}/c`;
  await commitFiles(b, bd, { f: 'y' }, 'y');
  await b.ok(bd, 'push', 'origin', 'main', 'main:side');
  return { url, ad, bd, x };
}

async function remoteRefs(user: GitUser, dir: string, url: string): Promise<string> {
  return user.ok(dir, 'ls-remote', url);
}

describe("git's local decisions against a stale cached view never lose a commit", () => {
  it('an older main is not "Everything up-to-date": git is told to fetch first', async () => {
    const { url, ad, bd } = await staleSetup();
    const before = await remoteRefs(b, bd, url);
    const res = await a.git(ad, 'push', 'origin', 'main');
    assert.notEqual(res.code, 0, res.stderr);
    assert.doesNotMatch(res.stderr, /Everything up-to-date/);
    assert.match(res.stderr, /\(fetch first\)/);
    assert.equal(await remoteRefs(b, bd, url), before);
  });

  it('a fast-forward of the stale value is refused as "fetch first"', async () => {
    const { url, ad, bd } = await staleSetup();
    const before = await remoteRefs(b, bd, url);
    await commitFiles(a, ad, { f: 'z' }, 'z');
    const res = await a.git(ad, 'push', 'origin', 'main');
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /\(fetch first\)/);
    assert.equal(await remoteRefs(b, bd, url), before);
  });

  it('a forced push and a delete act on the value git was shown, as with any git remote', async () => {
    const { url, ad, bd } = await staleSetup();
    const z = await commitFiles(a, ad, { f: 'z' }, 'z');
    const forced = await a.git(ad, 'push', '--force', 'origin', 'main');
    assert.equal(forced.code, 0, forced.stderr);
    const deleted = await a.git(ad, 'push', 'origin', ':side');
    assert.equal(deleted.code, 0, deleted.stderr);
    const after = await remoteRefs(b, bd, url);
    assert.match(after, new RegExp(`^${z}\trefs/heads/main$`, 'm'));
    assert.doesNotMatch(after, /refs\/heads\/side/);
  });

  it('a lease that holds against the stale view is still checked against the real value', async () => {
    const { url, ad, bd, x } = await staleSetup();
    const before = await remoteRefs(b, bd, url);
    await commitFiles(a, ad, { f: 'z' }, 'z');
    const res = await a.git(ad, 'push', `--force-with-lease=main:${x}`, 'origin', 'main');
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /stale info/);
    assert.equal(await remoteRefs(b, bd, url), before);
  });

  it('an atomic push re-reads the refs and applies nothing when one update fails', async () => {
    const { url, ad, bd } = await staleSetup();
    const before = await remoteRefs(b, bd, url);
    await commitFiles(a, ad, { f: 'z' }, 'z');
    const res = await a.git(ad, 'push', '--atomic', 'origin', 'main', 'main:brand-new');
    assert.notEqual(res.code, 0);
    assert.equal(await remoteRefs(b, bd, url), before);
  });

  it('new branches created in one commit: a branch the other machine created meanwhile is not overwritten', async () => {
    const { url, ad, bd } = await staleSetup();
    // b creates "both"; a, whose view has no "both", creates it and "mine" in one batch, which the
    // PDS refuses whole; written one by one, "mine" lands and "both" is refused as git would.
    await commitFiles(b, bd, { g: 'b' }, 'b only');
    await b.ok(bd, 'push', 'origin', 'HEAD:refs/heads/both');
    const theirs = (await remoteRefs(b, bd, url)).split('\n').find((l) => l.endsWith('refs/heads/both'));
    await commitFiles(a, ad, { g: 'a' }, 'a only');
    const res = await a.git(ad, 'push', 'origin', 'HEAD:refs/heads/both', 'HEAD:refs/heads/mine');
    assert.notEqual(res.code, 0);
    assert.match(res.stderr, /both \((fetch first|stale info)\)/);
    const after = await remoteRefs(b, bd, url);
    assert.ok(after.includes(theirs!), after);
    assert.match(after, /refs\/heads\/mine/);
  });

  it('two machines racing on one branch: exactly one wins, the other is told to fetch first', async () => {
    for (let round = 0; round < 3; round++) {
      const { url, ad, bd } = await staleSetup();
      await a.ok(ad, 'fetch', '-q');
      await a.ok(ad, 'reset', '-q', '--hard', 'origin/main');
      const mine = await commitFiles(a, ad, { g: `a${round}` }, 'from a');
      const theirs = await commitFiles(b, bd, { g: `b${round}` }, 'from b');
      const [ra, rb] = await Promise.all([
        a.git(ad, 'push', 'origin', 'main'),
        b.git(bd, 'push', 'origin', 'main'),
      ]);
      assert.equal([ra, rb].filter((r) => r.code === 0).length, 1, `${ra.stderr}\n${rb.stderr}`);
      const loser = ra.code === 0 ? rb : ra;
      assert.match(loser.stderr, /\((fetch first|non-fast-forward)\)/);
      const head = (await a.ok(ad, 'ls-remote', url, 'refs/heads/main')).split('\t')[0];
      assert.equal(head, ra.code === 0 ? mine : theirs);
    }
  });

  it('agents on one machine pushing their own branches at once are never refused (one shared view)', async () => {
    const name = `stale-${++n}`;
    assert.equal((await a.knotless('repo', 'create', name)).code, 0);
    const url = `knotless://alice.test/${name}`;
    const seed = await newRepo(a, url);
    await commitFiles(a, seed, { s: 'seed' }, 'seed');
    await a.ok(seed, 'push', '-q', 'origin', 'main');
    const clones = await Promise.all(
      [1, 2, 3].map(async (i) => {
        const dir = a.dir();
        await a.ok(dir, 'clone', '-q', url, 'c');
        await a.ok(`${dir}/c`, 'checkout', '-q', '-b', `agent-${i}`);
        return { i, dir: `${dir}/c` };
      }),
    );
    const failures: string[] = [];
    await Promise.all(
      clones.map(async ({ i, dir }) => {
        for (let k = 0; k < 4; k++) {
          await commitFiles(a, dir, { [`f${i}`]: `${k}` }, `agent ${i} push ${k}`);
          const res = await a.git(dir, 'push', '-q', 'origin', `agent-${i}`);
          if (res.code !== 0) failures.push(res.stderr);
        }
      }),
    );
    assert.deepEqual(failures, []);
    const ls = await a.ok(seed, 'ls-remote', url);
    for (const { i, dir } of clones) {
      assert.match(
        ls,
        new RegExp(`^${(await a.ok(dir, 'rev-parse', 'HEAD')).trim()}\trefs/heads/agent-${i}$`, 'm'),
      );
    }
  });
});
