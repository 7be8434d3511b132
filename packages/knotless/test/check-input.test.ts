import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import path from 'node:path';
import { json, newSite, openPr, tipOf, useForgeNet, writeRaw } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

const {
  t,
  users: [alice, bob],
} = useForgeNet(['alice.test', 'bob.test']);

interface ListJson {
  checks: { context: string; state: string; runner: string; description?: string }[];
}

let head = '';
let aliceClone = '';

/** `knotless check set` on alice's site as bob, with these options after the commit. */
function setCheck(commit: string, ...more: string[]) {
  return bob.knotless('check', 'set', 'alice.test/site', commit, ...more);
}

/** A refusal: usage (exit 2), one line, nothing a terminal would act on. */
function assertRefused(res: { code: number | null; stderr: string }, why: RegExp): void {
  assert.equal(res.code, 2, res.stderr);
  assert.match(res.stderr, why);
  assert.equal(res.stderr.trim().split('\n').length, 1, res.stderr);
  // eslint-disable-next-line no-control-regex
  assert.ok(!/[\u0000-\u0008\u000b-\u001f\u007f\u202a-\u202e\u2066-\u2069]/u.test(res.stderr), res.stderr);
}

describe('check input', () => {
  it('alice has a repository', async () => {
    await t.ready;
    aliceClone = await newSite(alice, 'alice.test');
    head = await tipOf(alice, 'knotless://alice.test/site', 'main');
    assert.match(head, /^[0-9a-f]{40}$/);
  });

  it('a context with a bidi override or over 100 characters is refused by the rule readers use', async () => {
    const bidi = await setCheck(head, '--context', 'test\u202etsil', '--state', 'success');
    assertRefused(bidi, /^knotless: The check cannot be written: its context holds control characters\./);
    const long = await setCheck(head, '--context', 'x'.repeat(101), '--state', 'success');
    assertRefused(long, /^knotless: The check cannot be written: .*context.*\./);
    const fine = await setCheck(head, '--context', 'x'.repeat(100), '--state', 'success');
    assert.equal(fine.code, 0, fine.stderr);
  });

  it('a description with an escape sequence, a tab or a bidi override is refused, in one sentence', async () => {
    for (const description of ['all \x1b[2Jgreen', 'all\tgreen', 'all \u202egreen']) {
      const res = await setCheck(
        head,
        '--context',
        'lint',
        '--state',
        'success',
        '--description',
        description,
      );
      assertRefused(res, /^knotless: The check cannot be written: its description holds control characters/);
    }
  });

  it('a hand-written check whose description holds an escape sequence is skipped by readers, never printed', async () => {
    await writeRaw(t, 'bob.test', 'dev.knotless.check', {
      repo: `at://${t.dids['alice.test']}/dev.knotless.repo/site`,
      commit: head,
      context: 'forged',
      state: 'success',
      description: 'ok\x1b]0;owned\x07 \u2028waiting: nothing',
      createdAt: new Date().toISOString(),
    });
    const listed = await alice.knotless('check', 'list', 'alice.test/site', head, '--runner', 'bob.test');
    assert.equal(listed.code, 0, listed.stderr);
    assert.doesNotMatch(listed.stdout, /forged/);
    // eslint-disable-next-line no-control-regex
    assert.doesNotMatch(listed.stdout + listed.stderr, /[\x1b\x07\u2028]/);
    assert.match(
      listed.stderr,
      /An invalid dev\.knotless\.check record \(its description holds control characters/,
    );
    const asJson = json<ListJson>(
      await alice.knotless('check', 'list', 'alice.test/site', head, '--runner', 'bob.test', '--json'),
    );
    assert.deepEqual(
      asJson.checks.map((c) => c.context),
      ['x'.repeat(100)],
    );
  });

  it('a check on a commit the repository does not hold is refused unless --force', async () => {
    const stranger = '0123456789abcdef0123456789abcdef01234567';
    const refused = await setCheck(stranger, '--context', 'test', '--state', 'success');
    assert.equal(refused.code, 17, refused.stderr);
    assert.match(
      refused.stderr,
      /^knotless: 0123456789ab is in no branch, tag or pull request of alice\.test\/site; check the commit id .*--force\.\n$/,
    );
    const forced = await setCheck(stranger, '--context', 'test', '--state', 'success', '--force');
    assert.equal(forced.code, 0, forced.stderr);
  });

  it("a commit in a branch's history, and a pull request round's head from a fork, are in the repository", async () => {
    await commitFiles(alice, aliceClone, { 'c.txt': 'c\n' }, 'alice adds c');
    await alice.ok(aliceClone, 'push', '-q', 'origin', 'main');
    assert.notEqual(await tipOf(alice, 'knotless://alice.test/site', 'main'), head);
    const old = await setCheck(head, '--context', 'history', '--state', 'success');
    assert.equal(old.code, 0, old.stderr);

    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const bobClone = `${bob.dir()}/c`;
    await bob.ok(path.dirname(bobClone), 'clone', '-q', 'knotless://bob.test/site', 'c');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'feature');
    const change = await commitFiles(bob, bobClone, { 'b.txt': 'b\n' }, 'bob adds b');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'feature');
    const before = await setCheck(change, '--context', 'test', '--state', 'success');
    assert.equal(before.code, 17, before.stderr);
    await openPr(bob, 'alice.test/site', 'bob.test/site:feature', 'Add b');
    const round = await setCheck(change, '--context', 'test', '--state', 'success');
    assert.equal(round.code, 0, round.stderr);
  });
});
