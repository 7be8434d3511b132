// Accounts that go away (deactivated, taken down, deleted) and come back, and handles that change:
// what the helper and the CLI say, from a shell that knew the account and from one that did not.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { knotless, type Run } from './helpers/cli.ts';
import { newSite, useForgeNet } from './helpers/forge.ts';

const {
  t,
  users: [alice, bob],
} = useForgeNet(['alice.test', 'bob.test']);

/** `knotless dev account …` on the test network, as from a dev network's shell. */
async function devAccount(...args: string[]): Promise<string> {
  const res = await knotless(['dev', 'account', ...args, '--dir', t.net.dir], {
    env: { ...t.env(), KNOTLESS_DEV_PASSWORD: t.password },
  });
  assert.equal(res.code, 0, res.stderr);
  return res.stdout.trim();
}

/** A shell that has never resolved anyone (a cold identity cache). */
function cold(...args: string[]): Promise<Run> {
  return knotless(args, { env: t.env() });
}

/** The one line a failed command printed, checked to be one sentence and not a "not found". */
function sentence(res: Run, code: number): string {
  assert.equal(res.code, code, res.stderr);
  const lines = res.stderr.trim().split('\n');
  assert.equal(lines.length, 1, res.stderr);
  assert.doesNotMatch(lines[0]!, /not found|check its spelling|does not exist/i);
  return lines[0]!;
}

describe('accounts that go away and come back, and handles that change', () => {
  let url = '';
  before(async () => {
    await t.ready;
    await newSite(alice, 'alice.test');
    url = 'knotless://alice.test/site';
    // Bob's shell has resolved alice: a warm cache.
    await bob.ok(bob.dir(), 'ls-remote', url);
  });

  it('a deactivated account: one sentence naming it and its state, from a warm and a cold shell', async () => {
    assert.equal(
      await devAccount('alice.test', 'deactivate'),
      `alice.test is deactivated on ${t.net.pdsUrl}.`,
    );
    const expected =
      'knotless: The account alice.test is deactivated; its repositories are unavailable until its owner activates it again.';
    assert.equal(sentence(await bob.git(bob.dir(), 'ls-remote', url), 128), expected);
    assert.equal(sentence(await bob.knotless('repo', 'list', 'alice.test'), 18), expected);
    assert.equal(sentence(await bob.knotless('repo', 'info', 'alice.test/site'), 18), expected);
    assert.equal(sentence(await cold('repo', 'list', 'alice.test'), 18), expected);
  });

  it('reactivated: the same commands work again, nothing lost', async () => {
    assert.equal(
      await devAccount('alice.test', 'activate'),
      `alice.test is active again on ${t.net.pdsUrl}.`,
    );
    assert.match(await bob.ok(bob.dir(), 'ls-remote', url), /refs\/heads\/main/);
    const listed = await cold('repo', 'list', 'alice.test');
    assert.equal(listed.code, 0, listed.stderr);
    assert.equal(listed.stdout.trim(), 'site');
  });

  it('taken down by its PDS, then restored', async () => {
    await devAccount(t.dids['alice.test']!, 'takedown');
    const down = sentence(await bob.git(bob.dir(), 'ls-remote', url), 128);
    assert.equal(
      down,
      `knotless: The account alice.test has been taken down by its PDS (${t.net.pdsUrl}); its repositories are unavailable.`,
    );
    assert.equal(sentence(await cold('repo', 'list', 'alice.test'), 18), down);
    await devAccount(t.dids['alice.test']!, 'restore');
    assert.match(await bob.ok(bob.dir(), 'ls-remote', url), /refs\/heads\/main/);
  });

  it('a new handle is used at once; the old one names nothing; the DID keeps working', async () => {
    assert.equal(
      await devAccount('alice.test', 'handle', 'alice2.test'),
      `alice.test is now alice2.test (${t.dids['alice.test']!}).`,
    );
    const renamed = await cold('repo', 'list', 'alice2.test');
    assert.equal(renamed.code, 0, renamed.stderr);
    assert.equal(renamed.stdout.trim(), 'site');
    assert.match(await bob.ok(bob.dir(), 'ls-remote', 'knotless://alice2.test/site'), /refs\/heads\/main/);
    const old = await cold('repo', 'list', 'alice.test');
    assert.equal(old.code, 3, old.stderr);
    const byDid = await cold('repo', 'list', t.dids['alice.test']!);
    assert.equal(byDid.code, 0, byDid.stderr);
    // Her own shell: whoami reads the handle verified at login, the commands the one verified now.
    const mine = await alice.knotless('repo', 'info', 'alice2.test/site');
    assert.equal(mine.code, 0, mine.stderr);
  });

  it('deleted: its repositories are gone, said in one sentence', async () => {
    await devAccount('alice2.test', 'delete');
    assert.equal(
      sentence(await bob.git(bob.dir(), 'ls-remote', 'knotless://alice2.test/site'), 128),
      `knotless: The account alice2.test has been deleted from its PDS (${t.net.pdsUrl}); its repositories are gone.`,
    );
  });
});
