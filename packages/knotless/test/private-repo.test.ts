// Private repositories: everything pushed is sealed on the pusher's machine; the account's records
// and blobs, read as anyone can read them, hold none of it; members open it, others are refused in
// one sentence, a removed member cannot read what is pushed after.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import path from 'node:path';
import { accountBytes } from './helpers/account-dump.ts';
import { knotless, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, refsOf, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test', 'carol.test']);
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0' }));
const bob = useGitUser(t, 'bob.test');
const carol = useGitUser(t, 'carol.test');

const mark = (what: string) => `MARK${what}${crypto.randomBytes(6).toString('hex')}`;
const markers = {
  content: mark('content'),
  path: mark('path'),
  message: mark('message'),
  branch: mark('branch'),
  small: mark('small'),
};
const NO_KEY =
  'knotless: alice.test/secret is private, and this machine holds no key that opens it; ask its owner to share it with you (`knotless repo share`), or import your key with `knotless key import`.\n';

function assertNoMarker(bytes: Buffer, where: string, list: string[]): void {
  for (const m of list) assert.equal(bytes.indexOf(m), -1, `${m} found in ${where}`);
}

describe('private repositories', () => {
  let work = '';
  let tip = '';

  it('pushes a repository whose records and blobs hold no marker and no git pack', async () => {
    const made = await alice.knotless('repo', 'create', 'secret', '--private');
    assert.equal(made.code, 0, made.stderr);
    work = await newRepo(alice, 'knotless://alice.test/secret');
    await alice.ok(work, 'config', 'pack.compression', '0');
    // A large incompressible file (the pack goes to blobs) and a small one (inline packs).
    const big = `${markers.content}\n${crypto.randomBytes(200_000).toString('hex')}\n${markers.content}\n`;
    await commitFiles(alice, work, { [`${markers.path}/big.txt`]: big }, `first ${markers.message}`);
    await alice.ok(work, 'push', '-q', 'origin', 'main', `main:refs/heads/${markers.branch}`);
    tip = await commitFiles(alice, work, { 'small.txt': `${markers.small}\n` }, `second ${markers.message}`);
    await alice.ok(work, 'push', '-q', 'origin', 'main');

    const { car, blobs } = await accountBytes(t, t.dids['alice.test']!);
    assert.ok(car.length > 0 && blobs.length > 0, 'the pack went to blobs');
    assertNoMarker(car, 'the records', Object.values(markers));
    for (const [i, b] of blobs.entries()) {
      assertNoMarker(b, `blob ${i}`, Object.values(markers));
      assert.notEqual(b.subarray(0, 4).toString('latin1'), 'PACK', `blob ${i} is a git pack`);
    }
    // The owner reads it back.
    const clone = alice.dir();
    await alice.ok(clone, 'clone', '-q', 'knotless://alice.test/secret', 'c');
    assert.equal((await alice.ok(`${clone}/c`, 'rev-parse', 'HEAD')).trim(), tip);
    assert.match(await refsOf(alice, `${clone}/c`, 'refs/remotes/'), new RegExp(markers.branch));
  });

  it('clones it shallow and partial for the owner, the opened objects kept in a mirror only its user can enter', async () => {
    const dir = alice.dir();
    await alice.ok(dir, 'clone', '-q', '--depth', '1', 'knotless://alice.test/secret', 's');
    assert.equal((await alice.ok(`${dir}/s`, 'rev-parse', '--is-shallow-repository')).trim(), 'true');
    assert.equal((await alice.ok(`${dir}/s`, 'rev-list', '--count', 'HEAD')).trim(), '1');
    await alice.ok(
      dir,
      'clone',
      '-q',
      '--no-checkout',
      '--filter=blob:none',
      'knotless://alice.test/secret',
      'p',
    );
    const lacking = await alice.ok(
      `${dir}/p`,
      'rev-list',
      '--objects',
      '--all',
      '--missing=print',
      '--quiet',
    );
    assert.match(lacking, /^\?[0-9a-f]{40}$/m, 'the partial clone lacks blobs');
    // The lazy fetch of the big file's blob, opened from the sealed packs.
    await alice.ok(`${dir}/p`, 'checkout', '-q', 'main');
    assert.match(fs.readFileSync(`${dir}/p/${markers.path}/big.txt`, 'utf8'), new RegExp(markers.content));
    await alice.ok(`${dir}/p`, 'fsck', '--no-progress');
    const mirrors = path.join(
      alice.env['KNOTLESS_CACHE_DIR']!,
      'mirrors',
      t.dids['alice.test']!.replaceAll(':', '_'),
    );
    assert.ok(fs.existsSync(path.join(mirrors, 'secret.git')), 'no mirror where expected');
    assert.equal(fs.statSync(mirrors).mode & 0o077, 0, 'the mirror folder is open to others');
  });

  it('finds the same markers in a plain repository (the scan above can fail)', async () => {
    assert.equal((await carol.knotless('repo', 'create', 'control')).code, 0);
    const dir = await newRepo(carol, 'knotless://carol.test/control');
    await carol.ok(dir, 'config', 'pack.compression', '0');
    const big = `${markers.content}\n${crypto.randomBytes(200_000).toString('hex')}\n`;
    await commitFiles(carol, dir, { [`${markers.path}/big.txt`]: big }, `first ${markers.message}`);
    await carol.ok(dir, 'push', '-q', 'origin', `main:refs/heads/${markers.branch}`);
    const { car, blobs } = await accountBytes(t, t.dids['carol.test']!);
    assert.notEqual(car.indexOf(markers.branch), -1, 'a plain ref record names its branch');
    assert.ok(
      blobs.some((b) => b.subarray(0, 4).toString('latin1') === 'PACK' && b.indexOf(markers.content) !== -1),
    );
  });

  it('leaves a public repository as it was: repo commit from the cached view after a push', async () => {
    // The view a push leaves is read without a listing: privacy is settled from it, with no request.
    assert.equal((await carol.knotless('repo', 'create', 'plain')).code, 0);
    const dir = await newRepo(carol, 'knotless://carol.test/plain');
    await commitFiles(carol, dir, { 'a.txt': 'a\n' }, 'first');
    await carol.ok(dir, 'push', '-q', 'origin', 'main');
    const res = await carol.knotless('repo', 'commit', 'plain', '-m', 'bot', '--delete', 'a.txt');
    assert.equal(res.code, 0, res.stderr);
  });

  it('refuses a non-member in one sentence', async () => {
    const res = await bob.git(bob.dir(), 'clone', '-q', 'knotless://alice.test/secret', 'c');
    assert.notEqual(res.code, 0);
    assert.ok(res.stderr.includes(NO_KEY), res.stderr);
  });

  it('lets a member added with share clone it, and not after unshare', async () => {
    const keys = await bob.knotless('key', 'list');
    assert.equal(keys.code, 0, keys.stderr);
    const bobPrint = keys.stdout.match(/^\* ([0-9a-f]{4}(?: [0-9a-f]{4}){3})/m)?.[1];
    assert.ok(bobPrint, keys.stdout);
    const shared = await alice.knotless('repo', 'share', 'secret', 'bob.test');
    assert.equal(shared.code, 0, shared.stderr);
    assert.ok(shared.stderr.includes(bobPrint), shared.stderr);
    const info = await bob.knotless('repo', 'info', 'alice.test/secret');
    assert.match(info.stdout, /refs {9}2\n/);
    assert.ok(info.stdout.includes(`members ${t.dids['alice.test']}, ${t.dids['bob.test']}`), info.stdout);

    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://alice.test/secret', 'c');
    assert.equal((await bob.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), tip);

    // Bob's second machine: nothing opens it until bob's key is imported there.
    const file = path.join(bob.dir(), 'bob.key');
    const phrase = { KNOTLESS_KEY_PASSPHRASE: 'correct horse battery' };
    const exported = await knotless(['key', 'export', file], { env: { ...bob.env, ...phrase } });
    assert.equal(exported.code, 0, exported.stderr);
    const home = bob.dir();
    const second = {
      ...bob.env,
      KNOTLESS_CONFIG_DIR: path.join(home, 'config'),
      KNOTLESS_CACHE_DIR: path.join(home, 'cache'),
    };
    const lsRemote = () =>
      runProcess('git', ['ls-remote', 'knotless://alice.test/secret'], { env: second, cwd: home });
    assert.ok((await lsRemote()).stderr.includes(NO_KEY));
    const wrong = await knotless(['key', 'import', file], {
      env: { ...second, KNOTLESS_KEY_PASSPHRASE: 'not the passphrase' },
    });
    assert.equal(wrong.code, 4, wrong.stderr);
    const imported = await knotless(['key', 'import', file], { env: { ...second, ...phrase } });
    assert.equal(imported.code, 0, imported.stderr);
    assert.ok(imported.stderr.includes(bobPrint), imported.stderr);
    const listed = await lsRemote();
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok(listed.stdout.includes(tip));

    const removed = await alice.knotless('repo', 'unshare', 'secret', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    const later = await commitFiles(alice, work, { 'later.txt': 'after\n' }, 'after unshare');
    await alice.ok(work, 'push', '-q', 'origin', 'main');
    const fetched = await bob.git(`${dir}/c`, 'fetch', '-q', 'origin');
    assert.notEqual(fetched.code, 0);
    assert.ok(fetched.stderr.includes(NO_KEY), fetched.stderr);
    const again = alice.dir();
    await alice.ok(again, 'clone', '-q', 'knotless://alice.test/secret', 'c');
    assert.equal((await alice.ok(`${again}/c`, 'rev-parse', 'HEAD')).trim(), later);
    tip = later;
  });

  it('keeps a third account out throughout', async () => {
    const res = await carol.git(carol.dir(), 'ls-remote', 'knotless://alice.test/secret');
    assert.notEqual(res.code, 0);
    assert.ok(res.stderr.includes(NO_KEY), res.stderr);
  });
});
