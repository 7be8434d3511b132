import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { knotless, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// The cache and config folders are trusted as ssh trusts ~/.ssh: a cache under a folder anyone can
// write could hold another user's identity.json that sends knotless://bob.test/x to carol's
// repository. Each case plants exactly that, and the helper and the CLI must refuse before reading it.
const t = useNetwork(['bob.test', 'carol.test']);
const bob = useGitUser(t, 'bob.test', () => ({ KNOTLESS_AGENT: '0' }));
const carol = useGitUser(t, 'carol.test', () => ({ KNOTLESS_AGENT: '0' }));
const URL = 'knotless://bob.test/x';

let carolHead = '';
let planted = '';
let victim: Record<string, string> = {};

/** Pushes one commit to `<user>/x`; returns it. */
async function repoX(user: typeof bob, content: string): Promise<string> {
  const made = await user.knotless('repo', 'create', 'x');
  assert.equal(made.code, 0, made.stderr);
  const dir = await newRepo(user, `knotless://${user === bob ? 'bob' : 'carol'}.test/x`);
  const head = await commitFiles(user, dir, { 'f.txt': content }, content);
  await user.ok(dir, 'push', '-q', 'origin', 'main');
  return head;
}

const lsRemote = (env: Record<string, string>) =>
  runProcess('git', ['ls-remote', URL], { env, cwd: t.tmpdir() });

/** A copy of the planted cache at `dir`, and the environment that uses it. */
function cacheAt(dir: string): Record<string, string> {
  fs.cpSync(planted, dir, { recursive: true });
  return { ...victim, KNOTLESS_CACHE_DIR: dir };
}

/** Refused before reading anything: one sentence of ours (git may add its own lines), no listing. */
function assertRefused(
  res: { code: number | null; stdout: string; stderr: string },
  folder: string,
  fix: RegExp,
  code = 128,
) {
  assert.equal(res.code, code, res.stderr);
  assert.ok(!res.stdout.includes(carolHead), "carol's repository was listed");
  const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
  assert.equal(ours.length, 1, res.stderr);
  assert.doesNotMatch(res.stderr, /^\s+at /m, res.stderr);
  assert.ok(ours[0]!.includes(folder), res.stderr);
  assert.match(ours[0]!, fix);
}

/** The repositories and the planted cache (in the suite's hook: root hooks, the logins among them, run side by side). */
async function plant(): Promise<void> {
  await repoX(bob, 'bob\n');
  carolHead = await repoX(carol, 'carol\n');
  // A cache as a real run leaves it, then bob.test's entry pointed at carol's DID.
  victim = { ...bob.env, KNOTLESS_AGENT: '0' };
  planted = path.join(t.tmpdir(), 'cache');
  const env = { ...victim, KNOTLESS_CACHE_DIR: planted };
  for (const url of [URL, 'knotless://carol.test/x']) {
    const res = await runProcess('git', ['ls-remote', url], { env, cwd: t.tmpdir() });
    assert.equal(res.code, 0, res.stderr);
  }
  const file = path.join(planted, 'identity.json');
  const data = JSON.parse(fs.readFileSync(file, 'utf8')) as {
    handles: Record<string, { value: string }>;
    dids: Record<string, { value: { handle?: string } }>;
  };
  // Both directions agree in the file, as the cache requires: bob.test is carol's DID, and back.
  const carolDid = t.dids['carol.test']!;
  data.handles['bob.test']!.value = carolDid;
  data.dids[carolDid]!.value.handle = 'bob.test';
  fs.writeFileSync(file, JSON.stringify(data));
}

describe('cache and config folders others can write', () => {
  before(plant);

  it('the planted identity.json is read in a folder of our own, and caught by the handle check', async () => {
    const res = await lsRemote(cacheAt(path.join(t.tmpdir(), 'own')));
    // What the next cases refuse to read is read here: the first request goes to carol's DID as the
    // plant says. The cached handle's check beside it (both ways, afresh) finds bob.test naming
    // bob's DID, so nothing of carol's reaches git. The folder checks refuse before any reading.
    assert.notEqual(res.code, 0, res.stdout);
    assert.match(
      res.stderr,
      new RegExp(`The handle bob\\.test no longer belongs to ${t.dids['carol.test']!}`),
    );
    assert.ok(!res.stdout.includes(carolHead), "carol's repository was listed");
  });

  it('refuses a cache under a folder anyone can write (no sticky bit)', async () => {
    const shared = path.join(t.tmpdir(), 'shared');
    fs.mkdirSync(shared);
    fs.chmodSync(shared, 0o777);
    const env = cacheAt(path.join(shared, 'cache'));
    assertRefused(await lsRemote(env), shared, new RegExp(`chmod go-w ${shared}`));
    assertRefused(await knotless(['repo', 'list', 'bob.test'], { env }), shared, /chmod go-w/, 5);
  });

  it('accepts one under a folder with the sticky bit, as /tmp', async () => {
    const shared = path.join(t.tmpdir(), 'sticky');
    fs.mkdirSync(shared);
    fs.chmodSync(shared, 0o1777);
    const res = await lsRemote({ ...victim, KNOTLESS_CACHE_DIR: path.join(shared, 'fresh') });
    assert.equal(res.code, 0, res.stderr);
  });

  it('refuses a cache folder others can write', async () => {
    const dir = path.join(t.tmpdir(), 'cache');
    const env = cacheAt(dir);
    fs.chmodSync(dir, 0o777);
    assertRefused(await lsRemote(env), dir, new RegExp(`chmod go-w ${dir}`));
  });

  it('refuses a cache folder that belongs to another user', async () => {
    // As root, a copy given to another uid; as anyone else, a folder of root's.
    const root = process.getuid?.() === 0;
    const dir = root ? path.join(t.tmpdir(), 'cache') : '/usr/share';
    const env = root ? cacheAt(dir) : { ...victim, KNOTLESS_CACHE_DIR: dir };
    if (root) fs.chownSync(dir, 4242, 4242);
    assertRefused(
      await lsRemote(env),
      dir,
      new RegExp(`belongs to another user \\(uid ${root ? 4242 : 0}\\)`),
    );
  });

  it('refuses a cache folder that is a symbolic link another user owns, even to a folder of ours', async () => {
    // Whoever owns the link can point it elsewhere at any moment, so where it points now proves nothing.
    const env = cacheAt(path.join(t.tmpdir(), 'linked-target'));
    const link = path.join(t.tmpdir(), 'linked-cache');
    fs.symlinkSync(env['KNOTLESS_CACHE_DIR']!, link);
    fs.lchownSync(link, 65534, 65534); // Giving a link to another user takes root, as these tests run.
    const linked = { ...env, KNOTLESS_CACHE_DIR: link };
    assertRefused(await lsRemote(linked), link, /symbolic link that belongs to another user \(uid 65534\)/);
    assertRefused(await knotless(['repo', 'list', 'bob.test'], { env: linked }), link, /symbolic link/, 5);
  });

  it('refuses a cache folder reached through a symbolic link another user owns', async () => {
    const real = path.join(t.tmpdir(), 'real-parent');
    fs.mkdirSync(real);
    cacheAt(path.join(real, 'cache'));
    const link = path.join(t.tmpdir(), 'linked-parent');
    fs.symlinkSync(real, link);
    fs.lchownSync(link, 65534, 65534);
    const env = { ...victim, KNOTLESS_CACHE_DIR: path.join(link, 'cache') };
    assertRefused(await lsRemote(env), link, /symbolic link that belongs to another user \(uid 65534\)/);
  });

  it('refuses a config folder others can write', async () => {
    const config = path.join(t.tmpdir(), 'config');
    fs.cpSync(victim['KNOTLESS_CONFIG_DIR']!, config, { recursive: true });
    fs.chmodSync(config, 0o777);
    const env = { ...cacheAt(path.join(t.tmpdir(), 'cache')), KNOTLESS_CONFIG_DIR: config };
    assertRefused(await knotless(['repo', 'list'], { env }), config, new RegExp(`chmod go-w ${config}`), 5);
  });
});
