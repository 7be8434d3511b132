// Writes that front ends make without git's push (`repo commit`, `pr merge`) on a repository with a
// maintainer (format.md, "Teams"): by the owner or by a maintainer, each is a push of the new
// commit into the writer's own table, naming in `over` the values it replaced and confirmed against
// every other writer's table after the write; so none leaves a divergence behind. A maintainer
// commits and merges as the owner does, but only the owner merges past required checks, and
// anyone else is refused before anything is written.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { knotless } from './helpers/cli.ts';
import { commitFiles } from './helpers/git.ts';
import {
  json,
  newSite,
  openPr,
  putHookProxy,
  useForgeNet,
  type ItemJson,
  type PutHookProxy,
} from './helpers/forge.ts';
import { lsRemote, tableHands } from './helpers/ref-table.ts';

const {
  t,
  users: [alice, bob, carol, dave],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test', 'dave.test']);

const REPO = 'alice.test/site';
const URL = 'knotless://alice.test/site';

/** The repository's refs as `user` lists them. */
async function refsOf(user: typeof alice): Promise<Map<string, string>> {
  const res = await user.git(user.dir(), 'ls-remote', URL);
  assert.equal(res.code, 0, res.stderr);
  return lsRemote(res.stdout);
}

/** Every reader lists main at `tip`, and no value apart under refs/maintainers/. */
async function settledAt(tip: string): Promise<void> {
  for (const [who, user] of [
    ['alice', alice],
    ['bob', bob],
    ['carol', carol],
  ] as const) {
    const refs = await refsOf(user);
    assert.equal(refs.get('refs/heads/main'), tip, `${who} lists main at ${tip}`);
    assert.deepEqual(
      [...refs.keys()].filter((r) => r.startsWith('refs/maintainers/')),
      [],
      `${who} lists no divergence`,
    );
  }
}

/** A local file holding `text`, for --add. */
function file(user: typeof alice, text: string): string {
  const f = path.join(user.dir(), 'f.txt');
  fs.writeFileSync(f, text);
  return f;
}

/** The refs of `site` in `handle`'s own ref table of alice's repository (a maintainer's). */
async function ownEntries(handle: string): Promise<string[]> {
  const key = `site~${t.dids['alice.test']!}`;
  const stored = await tableHands(t, handle).readTable(key);
  return (stored?.value.refs ?? []).map((r) => `${r.ref} ${r.target ?? '-'}`);
}

/** Bob's requests, with a hook before the next putRecord. */
let hooked: PutHookProxy | undefined;

describe('repo commit and pr merge on a repository with a maintainer', () => {
  before(async () => {
    await t.ready;
    hooked = await putHookProxy(t, 'bob.test');
  });
  after(async () => {
    await hooked?.proxy.close();
  });

  let wb = '';
  let wa = '';
  let pull: ItemJson;
  /** Carol's clone of alice's repository, with her fork as `fork`. */
  let c2 = '';

  it('bob, a maintainer, pushes main; alice commits to it without a clone, and nothing diverges', async () => {
    await t.ready;
    wa = await newSite(alice, 'alice.test');
    assert.equal((await alice.knotless('repo', 'maintainer', 'add', 'site', 'bob.test')).code, 0);
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', URL, 'b');
    wb = `${dir}/b`;
    await commitFiles(bob, wb, { 'bob.txt': 'bob\n' }, 'bob adds a file');
    await bob.ok(wb, 'push', '-q', 'origin', 'main');
    const bobs = (await bob.ok(wb, 'rev-parse', 'HEAD')).trim();
    const res = await alice.knotless(
      'repo',
      'commit',
      'site',
      '-m',
      'alice too',
      '--add',
      `alice.txt=${file(alice, 'a\n')}`,
    );
    assert.equal(res.code, 0, res.stderr);
    const made = res.stdout.trim();
    await settledAt(made);
    await bob.ok(wb, 'fetch', '-q', 'origin');
    assert.equal((await bob.git(wb, 'merge-base', '--is-ancestor', bobs, 'origin/main')).code, 0);
  });

  it("bob commits to alice's repository without a clone: into his own table, and every reader lists it", async () => {
    const res = await bob.knotless(
      'repo',
      'commit',
      REPO,
      '-m',
      'bob, no clone',
      '--add',
      `c.txt=${file(bob, 'c\n')}`,
    );
    assert.equal(res.code, 0, res.stderr);
    const made = res.stdout.trim();
    await settledAt(made);
    assert.ok(
      (await ownEntries('bob.test')).includes(`refs/heads/main ${made}`),
      "the commit is bob's own entry",
    );
    await bob.ok(wb, 'pull', '-q', '--ff-only', 'origin', 'main');
    assert.equal(fs.readFileSync(path.join(wb, 'c.txt'), 'utf8'), 'c\n');
  });

  it('dave, who maintains nothing, cannot commit to it: one sentence, exit 5, nothing written', async () => {
    const before = await refsOf(carol);
    const res = await dave.knotless(
      'repo',
      'commit',
      REPO,
      '-m',
      'dave',
      '--add',
      `d.txt=${file(dave, 'd\n')}`,
    );
    assert.equal(res.code, 5);
    assert.equal(
      res.stderr,
      'knotless: Only alice.test and the maintainers it lists can commit to alice.test/site; you are dave.test.\n',
    );
    assert.deepEqual(await refsOf(carol), before);
    assert.deepEqual(await ownEntries('dave.test'), []);
  });

  it('carol opens a pull request from her fork; dave cannot merge it, bob can, and it counts as merged', async () => {
    assert.equal((await carol.knotless('repo', 'fork', REPO)).code, 0);
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', 'knotless://carol.test/site', 'c');
    await carol.ok(`${dir}/c`, 'switch', '-q', '-c', 'fix');
    await commitFiles(carol, `${dir}/c`, { 'fix.txt': 'from carol\n' }, 'carol fixes');
    await carol.ok(`${dir}/c`, 'push', '-q', 'origin', 'fix');
    pull = await openPr(carol, REPO, 'site:fix', 'A fix');
    const denied = await dave.knotless('pr', 'merge', REPO, pull.id);
    assert.equal(denied.code, 5);
    assert.equal(
      denied.stderr,
      "knotless: Only alice.test/site's owner or maintainers can merge it; you are dave.test.\n",
    );
    const before = (await refsOf(carol)).get('refs/heads/main')!;
    const merged = await bob.knotless('pr', 'merge', REPO, pull.id, '--squash');
    assert.equal(merged.code, 0, merged.stderr);
    const tip = merged.stdout.trim();
    await settledAt(tip);
    assert.ok(
      (await ownEntries('bob.test')).includes(`refs/heads/main ${tip}`),
      "the merge is bob's own entry",
    );
    await bob.ok(wb, 'pull', '-q', '--ff-only', 'origin', 'main');
    assert.equal((await bob.ok(wb, 'rev-parse', 'HEAD^')).trim(), before, 'squashed onto main as it was');
    assert.equal(fs.readFileSync(path.join(wb, 'fix.txt'), 'utf8'), 'from carol\n');
    for (const [who, user] of [
      ['alice', alice],
      ['carol', carol],
    ] as const) {
      const seen = json<ItemJson & { merged?: string }>(
        await user.knotless('pr', 'view', REPO, pull.id, '--json'),
      );
      assert.equal(seen.state, 'merged', `${who} reads it merged`);
      assert.equal(seen.merged, tip);
    }
  });

  it("alice's merge of a second pull request after bob's leaves no divergence either", async () => {
    const d = carol.dir();
    await carol.ok(d, 'clone', '-q', URL, 'c2');
    c2 = `${d}/c2`;
    const c = c2;
    await carol.ok(c, 'remote', 'add', 'fork', 'knotless://carol.test/site');
    await carol.ok(c, 'switch', '-q', '-c', 'more');
    await commitFiles(carol, c, { 'more.txt': 'more\n' }, 'carol adds more');
    await carol.ok(c, 'push', '-q', 'fork', 'more');
    const second = await openPr(carol, REPO, 'site:more', 'More');
    const merged = await alice.knotless('pr', 'merge', REPO, second.id);
    assert.equal(merged.code, 0, merged.stderr);
    await settledAt(merged.stdout.trim());
  });

  it("bob's merge that alice's push overtakes before its write is withdrawn: nothing of it stands", async () => {
    const c = c2;
    await carol.ok(c, 'fetch', '-q', 'origin');
    await carol.ok(c, 'switch', '-q', '-c', 'late', 'origin/main');
    await commitFiles(carol, c, { 'late.txt': 'late\n' }, 'carol adds late');
    await carol.ok(c, 'push', '-q', 'fork', 'late');
    const late = await openPr(carol, REPO, 'site:late', 'Late');
    let alices = '';
    // Alice's push lands (directly, not through the proxy) just before bob's table is written.
    hooked!.beforeNextPut(async () => {
      await alice.ok(wa, 'pull', '-q', '--ff-only', 'origin', 'main');
      alices = await commitFiles(alice, wa, { 'h.txt': 'h\n' }, 'alice adds h');
      await alice.ok(wa, 'push', '-q', 'origin', 'main');
    });
    const res = await knotless(['pr', 'merge', REPO, late.id], {
      env: { ...bob.env, KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: hooked!.proxy.url },
    });
    assert.equal(hooked!.failure(), undefined);
    assert.equal(res.code, 15, res.stderr);
    assert.equal(
      res.stderr.trim(),
      'knotless: main of alice.test/site moved while merging; nothing was written: run `knotless pr merge` again.',
    );
    assert.notEqual(alices, '');
    await settledAt(alices);
    assert.equal(json<ItemJson>(await carol.knotless('pr', 'view', REPO, late.id, '--json')).state, 'open');
    // Merged again, it lands on alice's commit.
    const merged = await bob.knotless('pr', 'merge', REPO, late.id);
    assert.equal(merged.code, 0, merged.stderr);
    await settledAt(merged.stdout.trim());
    await bob.ok(wb, 'pull', '-q', '--ff-only', 'origin', 'main');
    assert.equal((await bob.git(wb, 'merge-base', '--is-ancestor', alices, 'HEAD')).code, 0);
  });

  it('under a required check that has not passed, only alice merges past it', async () => {
    const protect = await alice.knotless('repo', 'protect', 'site', 'main', '--require-check', 'lint');
    assert.equal(protect.code, 0, protect.stderr);
    const c = c2;
    await carol.ok(c, 'fetch', '-q', 'origin');
    await carol.ok(c, 'switch', '-q', '-c', 'third', 'origin/main');
    await commitFiles(carol, c, { 'third.txt': 'third\n' }, 'carol adds a third');
    await carol.ok(c, 'push', '-q', 'fork', 'third');
    const third = await openPr(carol, REPO, 'site:third', 'Third');
    const before = await refsOf(carol);
    const unmet = await bob.knotless('pr', 'merge', REPO, third.id);
    assert.equal(unmet.code, 20, unmet.stderr);
    const past = await bob.knotless('pr', 'merge', REPO, third.id, '--ignore-checks');
    assert.equal(past.code, 5);
    assert.equal(
      past.stderr,
      "knotless: Merging past required checks is alice.test's alone, whoever required them; nothing was merged: wait for the checks to pass, or ask alice.test to merge.\n",
    );
    assert.deepEqual(await refsOf(carol), before, 'nothing moved');
    const owner = await alice.knotless('pr', 'merge', REPO, third.id, '--ignore-checks');
    assert.equal(owner.code, 0, owner.stderr);
    await settledAt(owner.stdout.trim());
  });
});

describe("a compaction of the owner's table on a repository with a maintainer", () => {
  it("keeps what each entry replaced: a compacted main still holds over bob's value", async () => {
    await t.ready;
    assert.equal((await alice.knotless('repo', 'create', 'packed')).code, 0);
    const url = 'knotless://alice.test/packed';
    const wa = alice.dir();
    await alice.ok(wa, 'init', '-q');
    await commitFiles(alice, wa, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(wa, 'remote', 'add', 'origin', url);
    await alice.ok(wa, 'push', '-q', 'origin', 'main');
    assert.equal((await alice.knotless('repo', 'maintainer', 'add', 'packed', 'bob.test')).code, 0);
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', url, 'b');
    await commitFiles(bob, `${dir}/b`, { 'b.txt': 'b\n' }, 'bob');
    await bob.ok(`${dir}/b`, 'push', '-q', 'origin', 'main');
    await alice.ok(wa, 'pull', '-q', '--ff-only', 'origin', 'main');
    // Several small pushes of alice's: a pack list a compaction merges.
    for (const n of [1, 2, 3, 4]) {
      await commitFiles(alice, wa, { [`n${n}.txt`]: `${n}\n` }, `alice ${n}`);
      await alice.ok(wa, 'push', '-q', 'origin', 'main');
    }
    const tip = (await alice.ok(wa, 'rev-parse', 'HEAD')).trim();
    const before = await tableHands(t, 'alice.test').readTable('packed');
    type Entry = { packs?: number[]; over?: { did: string; target?: string }[] } | undefined;
    const entry = before?.value.refs.find((r) => r.ref === 'refs/heads/main') as Entry;
    assert.ok((entry?.packs?.length ?? 0) > 1, 'several packs to merge');
    assert.equal(entry?.over?.[0]?.did, t.dids['bob.test'], "alice's main replaced bob's value");
    const compacted = await alice.knotless('repo', 'compact', 'packed');
    assert.equal(compacted.code, 0, compacted.stderr);
    const now = (await tableHands(t, 'alice.test').readTable('packed'))?.value.refs.find(
      (r) => r.ref === 'refs/heads/main',
    ) as Entry;
    assert.ok((now?.packs?.length ?? 0) < (entry?.packs?.length ?? 0), 'the list was compacted');
    assert.deepEqual(now?.over, entry?.over);
    const res = await carol.git(carol.dir(), 'ls-remote', url);
    assert.equal(res.code, 0, res.stderr);
    const refs = lsRemote(res.stdout);
    assert.equal(refs.get('refs/heads/main'), tip);
    assert.deepEqual(
      [...refs.keys()].filter((r) => r.startsWith('refs/maintainers/')),
      [],
    );
  });
});

describe("a maintainer's compaction of their own table", () => {
  it('merges their packs in their account, keeps what the entry replaced, and refuses anyone else', async () => {
    await t.ready;
    assert.equal((await alice.knotless('repo', 'create', 'theirs')).code, 0);
    const url = 'knotless://alice.test/theirs';
    const wa = alice.dir();
    await alice.ok(wa, 'init', '-q');
    await commitFiles(alice, wa, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(wa, 'remote', 'add', 'origin', url);
    await alice.ok(wa, 'push', '-q', 'origin', 'main');
    assert.equal((await alice.knotless('repo', 'maintainer', 'add', 'theirs', 'bob.test')).code, 0);
    const wb = `${bob.dir()}/b`;
    await bob.ok(path.dirname(wb), 'clone', '-q', url, 'b');
    for (const n of [1, 2, 3, 4]) {
      await commitFiles(bob, wb, { [`b${n}.txt`]: `${n}\n` }, `bob ${n}`);
      await bob.ok(wb, 'push', '-q', 'origin', 'main');
    }
    const tip = (await bob.ok(wb, 'rev-parse', 'HEAD')).trim();
    const key = `theirs~${t.dids['alice.test']!}`;
    type Entry = { packs?: number[]; over?: { did: string; target?: string }[] } | undefined;
    const entryOf = async () =>
      (await tableHands(t, 'bob.test').readTable(key))?.value.refs.find(
        (r) => r.ref === 'refs/heads/main',
      ) as Entry;
    const before = await entryOf();
    assert.ok((before?.packs?.length ?? 0) > 1, 'several packs to merge');
    assert.equal(before?.over?.[0]?.did, t.dids['alice.test'], "bob's main replaced alice's value");

    const refused = await dave.knotless('repo', 'compact', 'alice.test/theirs');
    assert.equal(refused.code, 5);
    assert.equal(
      refused.stderr,
      'knotless: Only alice.test and the maintainers of alice.test/theirs can compact it; you are dave.test.\n',
    );
    // A ref only alice pushed is not in bob's table: said so, not "no such ref"; a typo is a typo.
    await alice.ok(wa, 'push', '-q', 'origin', 'main:refs/heads/side');
    const hers = await bob.knotless('repo', 'compact', 'alice.test/theirs', '--ref', 'refs/heads/side');
    assert.equal(hers.code, 17, hers.stderr);
    assert.equal(
      hers.stderr,
      'knotless: refs/heads/side of alice.test/theirs is not in your own table of it (you have not pushed it), and a maintainer compacts only what they pushed; its packs are in the account of whoever last pushed it, who can compact them.\n',
    );
    const typo = await bob.knotless('repo', 'compact', 'alice.test/theirs', '--ref', 'main');
    assert.equal(typo.code, 17, typo.stderr);
    assert.match(typo.stderr, /^knotless: alice\.test\/theirs has no ref main; name refs in full/);
    const compacted = await bob.knotless('repo', 'compact', 'alice.test/theirs');
    assert.equal(compacted.code, 0, compacted.stderr);
    assert.match(compacted.stderr, /^refs\/heads\/main: \d+ packs → \d+\n$/);
    const after = await entryOf();
    assert.ok((after?.packs?.length ?? 0) < (before?.packs?.length ?? 0), 'the list was compacted');
    assert.deepEqual(after?.over, before?.over);
    // Every reader lists bob's main, and a fresh clone holds every commit.
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', url, 'c');
    assert.equal((await carol.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), tip);
    await carol.ok(`${dir}/c`, 'fsck', '--strict');
    const refs = lsRemote(await carol.ok(dir, 'ls-remote', url));
    assert.deepEqual(
      [...refs.keys()].filter((r) => r.startsWith('refs/maintainers/')),
      [],
    );
  });
});

describe('a merge into a table whose owner names a maintainer while it is on its way', () => {
  let held: PutHookProxy | undefined;
  before(async () => {
    await t.ready;
    held = await putHookProxy(t, 'alice.test');
  });
  after(async () => {
    await held?.proxy.close();
  });

  it("is refused with nothing written, and lands on the maintainer's commit when run again", async () => {
    assert.equal((await alice.knotless('repo', 'create', 'gate')).code, 0);
    const url = 'knotless://alice.test/gate';
    const wa = alice.dir();
    await alice.ok(wa, 'init', '-q');
    await commitFiles(alice, wa, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(wa, 'remote', 'add', 'origin', url);
    await alice.ok(wa, 'push', '-q', 'origin', 'main');
    assert.equal((await carol.knotless('repo', 'fork', 'alice.test/gate')).code, 0);
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', 'knotless://carol.test/gate', 'c');
    await carol.ok(`${dir}/c`, 'switch', '-q', '-c', 'topic');
    await commitFiles(carol, `${dir}/c`, { 'topic.txt': 'carol\n' }, 'carol');
    await carol.ok(`${dir}/c`, 'push', '-q', 'origin', 'topic');
    const pr = await openPr(carol, 'alice.test/gate', 'gate:topic', 'Topic');
    let bobs = '';
    // Just before alice's merge writes her table, she names bob (from another command) and he pushes.
    held!.beforeNextPut(async () => {
      const added = await alice.knotless('repo', 'maintainer', 'add', 'gate', 'bob.test');
      assert.equal(added.code, 0, added.stderr);
      const wb = bob.dir();
      await bob.ok(wb, 'clone', '-q', url, 'b');
      bobs = await commitFiles(bob, `${wb}/b`, { 'b.txt': 'bob\n' }, 'bob');
      await bob.ok(`${wb}/b`, 'push', '-q', 'origin', 'main');
    });
    const res = await knotless(['pr', 'merge', 'alice.test/gate', pr.id], {
      env: { ...alice.env, KNOTLESS_COMPACT: '0', KNOTLESS_SERVICE: held!.proxy.url },
    });
    assert.equal(held!.failure(), undefined);
    assert.equal(res.code, 15, res.stderr);
    assert.equal(
      res.stderr.trim(),
      'knotless: main of alice.test/gate moved while merging; nothing was written: run `knotless pr merge` again.',
    );
    const listed = async () => lsRemote(await carol.ok(carol.dir(), 'ls-remote', url));
    const before = await listed();
    assert.equal(before.get('refs/heads/main'), bobs);
    assert.deepEqual(
      [...before.keys()].filter((r) => r.startsWith('refs/maintainers/')),
      [],
    );
    const again = await alice.knotless('pr', 'merge', 'alice.test/gate', pr.id);
    assert.equal(again.code, 0, again.stderr);
    const after = await listed();
    assert.equal(after.get('refs/heads/main'), again.stdout.trim());
    assert.deepEqual(
      [...after.keys()].filter((r) => r.startsWith('refs/maintainers/')),
      [],
    );
    await alice.ok(wa, 'pull', '-q', '--ff-only', 'origin', 'main');
    assert.equal((await alice.git(wa, 'merge-base', '--is-ancestor', bobs, 'HEAD')).code, 0);
  });
});

describe('a fork run again on a fork with a maintainer', () => {
  it("copies no ref the fork's maintainer has: the original's value would diverge from theirs", async () => {
    await t.ready;
    assert.equal((await alice.knotless('repo', 'create', 'forked')).code, 0);
    const original = 'knotless://alice.test/forked';
    const wa = alice.dir();
    await alice.ok(wa, 'init', '-q');
    await commitFiles(alice, wa, { 'a.txt': 'a\n' }, 'first');
    await alice.ok(wa, 'remote', 'add', 'origin', original);
    await alice.ok(wa, 'push', '-q', 'origin', 'main');
    assert.equal((await carol.knotless('repo', 'fork', 'alice.test/forked')).code, 0);
    // After the fork, the original gains a branch, and the fork's maintainer pushes one of that name.
    await alice.ok(wa, 'checkout', '-q', '-b', 'feature');
    await commitFiles(alice, wa, { 'f.txt': 'alice\n' }, "alice's feature");
    await alice.ok(wa, 'push', '-q', 'origin', 'feature');
    assert.equal((await carol.knotless('repo', 'maintainer', 'add', 'forked', 'dave.test')).code, 0);
    const fork = 'knotless://carol.test/forked';
    const dir = dave.dir();
    await dave.ok(dir, 'clone', '-q', fork, 'd');
    await dave.ok(`${dir}/d`, 'checkout', '-q', '-b', 'feature');
    await commitFiles(dave, `${dir}/d`, { 'f.txt': 'dave\n' }, "dave's feature");
    await dave.ok(`${dir}/d`, 'push', '-q', 'origin', 'feature');
    const daves = (await dave.ok(`${dir}/d`, 'rev-parse', 'HEAD')).trim();
    const again = await carol.knotless('repo', 'fork', 'alice.test/forked');
    assert.equal(again.code, 6, again.stderr);
    const res = await bob.git(bob.dir(), 'ls-remote', fork);
    assert.equal(res.code, 0, res.stderr);
    const refs = lsRemote(res.stdout);
    assert.equal(refs.get('refs/heads/feature'), daves);
    assert.deepEqual(
      [...refs.keys()].filter((r) => r.startsWith('refs/maintainers/')),
      [],
    );
  });
});
