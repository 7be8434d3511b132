// Private repositories: everything pushed is sealed on the pusher's machine; the account's records
// and blobs, read as anyone can read them, hold none of it; members open it, others are refused in
// one sentence, a removed member cannot read what is pushed after.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, it } from 'node:test';
import { accountBytes } from './helpers/account-dump.ts';
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

    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://alice.test/secret', 'c');
    assert.equal((await bob.ok(`${dir}/c`, 'rev-parse', 'HEAD')).trim(), tip);

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
