import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { NO_CLONE, json, newSite, openPr, tipOf, useForgeNet, type ItemJson } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';

const {
  t,
  users: [alice, bob, carol],
} = useForgeNet(['alice.test', 'bob.test', 'carol.test']);

interface ListJson {
  commit: string;
  branch?: string;
  protected?: boolean;
  checks: { context: string; state: string; runner: string; trusted: boolean; description?: string }[];
  required?: string[];
  unmet?: { context: string; kind: string; reason: string }[];
}

let aliceClone = NO_CLONE;
let head = '';

describe('checks and protected branches', () => {
  it('alice has a repository', async () => {
    await t.ready;
    aliceClone = await newSite(alice, 'alice.test');
    head = await tipOf(alice, 'knotless://alice.test/site', 'main');
    assert.match(head, /^[0-9a-f]{40}$/);
    assert.ok(aliceClone);
  });

  it('refuses a check on no commit, with an unknown state, or a context with control characters', async () => {
    const short = await bob.knotless(
      'check',
      'set',
      'alice.test/site',
      head.slice(0, 12),
      '--context',
      'test',
      '--state',
      'success',
    );
    assert.equal(short.code, 2, short.stderr);
    assert.match(short.stderr, /40 hex digits/);
    const state = await bob.knotless(
      'check',
      'set',
      'alice.test/site',
      head,
      '--context',
      'test',
      '--state',
      'passed',
    );
    assert.equal(state.code, 2, state.stderr);
    assert.match(state.stderr, /--state is one of pending, success, failure, error/);
    const ctl = await bob.knotless(
      'check',
      'set',
      'alice.test/site',
      head,
      '--context',
      'te\x1b[2Jst',
      '--state',
      'success',
    );
    assert.equal(ctl.code, 2, ctl.stderr);
    assert.match(ctl.stderr, /The check cannot be written: its context holds control characters\./);
    assert.ok(!ctl.stderr.includes('\x1b'), ctl.stderr);
    assert.equal(ctl.stderr.trim().split('\n').length, 1, ctl.stderr);
  });

  it("alice protects main, requiring bob's test; only she can, and --show tells it", async () => {
    const denied = await bob.knotless(
      'repo',
      'protect',
      'alice.test/site',
      'main',
      '--require-check',
      'test',
    );
    assert.equal(denied.code, 5, denied.stderr);
    const res = await alice.knotless(
      'repo',
      'protect',
      'site',
      'main',
      '--require-check',
      'test',
      '--runner',
      'bob.test',
      '--json',
    );
    assert.equal(res.code, 0, res.stderr);
    const shown = json<{ branches: unknown[] }>(
      await carol.knotless('repo', 'protect', 'alice.test/site', '--show', '--json'),
    );
    // Each branch says what holds and, in `rules`, who set each requirement (here the owner alone).
    const rule = {
      branch: 'main',
      requiredChecks: ['test'],
      trustedRunners: [t.dids['bob.test']],
      allowForcePush: false,
      allowDeletion: false,
    };
    assert.deepEqual(shown.branches, [
      { ...rule, rules: [{ ...rule, by: t.dids['alice.test'], name: 'alice.test', owner: true }] },
    ]);
    const text = await carol.knotless('repo', 'protect', 'alice.test/site', 'main', '--show');
    assert.match(
      text.stdout,
      /required checks: test\n {2}trusted runners: the owner, bob\.test\n {2}force-push: refused; deletion: refused/,
    );
  });

  it("lists each runner's latest verdict, trusted runners marked, and what main still waits for", async () => {
    const missing = json<ListJson>(
      await carol.knotless('check', 'list', 'alice.test/site', 'main', '--json'),
    );
    assert.equal(missing.commit, head);
    assert.deepEqual(
      missing.unmet?.map((u) => [u.context, u.kind]),
      [['test', 'missing']],
    );

    assert.equal(
      (await bob.knotless('check', 'set', 'alice.test/site', head, '--context', 'test', '--state', 'pending'))
        .code,
      0,
    );
    const fail = await bob.knotless(
      'check',
      'set',
      'alice.test/site',
      head,
      '--context',
      'test',
      '--state',
      'failure',
      '--description',
      '3 of 12 failed',
      '--url',
      'https://ci.example/runs/1',
    );
    assert.equal(fail.code, 0, fail.stderr);
    const carolSays = await carol.knotless(
      'check',
      'set',
      'alice.test/site',
      head,
      '--context',
      'test',
      '--state',
      'success',
    );
    assert.equal(carolSays.code, 0, carolSays.stderr);

    const seen = json<ListJson>(
      await alice.knotless('check', 'list', 'alice.test/site', 'main', '--runner', 'carol.test', '--json'),
    );
    assert.deepEqual(
      seen.checks.map((c) => [c.context, c.state, c.runner, c.trusted]),
      [
        ['test', 'failure', 'bob.test', true],
        ['test', 'success', 'carol.test', false],
      ],
    );
    assert.deepEqual(
      seen.unmet?.map((u) => u.reason),
      ['test: failing (failure by bob.test)'],
    );
    const text = await alice.knotless('check', 'list', 'alice.test/site', head, '--runner', 'carol.test');
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /test {2}failure {2}bob\.test \(trusted\) {2}3 of 12 failed {2}https:\/\/ci\.example\/runs\/1/,
    );
    assert.match(text.stdout, /test {2}success {2}carol\.test \(untrusted\)/);
  });

  it("a merge into main waits for bob's test on the round's head: a check by carol does not count, a failure refuses, a success lets it through", async () => {
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const bobClone = `${bob.dir()}/c`;
    await bob.ok(path.dirname(bobClone), 'clone', '-q', 'knotless://bob.test/site', 'c');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'feature');
    const change = await commitFiles(bob, bobClone, { 'b.txt': 'b\n' }, 'bob adds b');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'feature');
    const pr = await openPr(bob, 'alice.test/site', 'bob.test/site:feature', 'Add b');
    const merge = (...more: string[]) => alice.knotless('pr', 'merge', 'alice.test/site', pr.id, ...more);
    const set = (who: typeof bob, state: string, ...more: string[]) =>
      who.knotless('check', 'set', 'alice.test/site', change, '--context', 'test', '--state', state, ...more);

    // Without an appview carol cannot find bob's pull request, so her check needs --force.
    assert.equal((await set(carol, 'success', '--force')).code, 0);
    const untrusted = await merge();
    assert.equal(untrusted.code, 20, untrusted.stderr);
    assert.equal(untrusted.stderr.trim().split('\n').length, 1, untrusted.stderr);
    assert.match(
      untrusted.stderr,
      /waits for the required checks of main on [0-9a-f]{12}: test: no check by a trusted runner yet; nothing was merged/,
    );

    assert.equal((await set(bob, 'failure')).code, 0);
    const failing = await merge();
    assert.equal(failing.code, 20, failing.stderr);
    assert.match(failing.stderr, /test: failing \(failure by bob\.test\); nothing was merged/);
    assert.equal(await tipOf(alice, 'knotless://alice.test/site', 'main'), head);
    assert.equal(
      json<ItemJson>(await alice.knotless('pr', 'view', 'alice.test/site', pr.id, '--json')).state,
      'open',
    );

    assert.equal((await set(bob, 'success')).code, 0);
    const merged = await merge('--json');
    assert.equal(merged.code, 0, merged.stderr);
    const done = json<ItemJson & { ignoredChecks?: string[] }>(merged);
    assert.equal(done.state, 'merged');
    assert.equal(done.ignoredChecks, undefined);
    head = await tipOf(alice, 'knotless://alice.test/site', 'main');
    assert.equal(head, change);
  });

  it('--ignore-checks merges anyway, and the pull request says so', async () => {
    const bobClone = `${bob.dir()}/c`;
    await bob.ok(path.dirname(bobClone), 'clone', '-q', 'knotless://bob.test/site', 'c');
    await bob.ok(bobClone, 'fetch', '-q', 'knotless://alice.test/site', 'main');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'hurry', 'FETCH_HEAD');
    const change = await commitFiles(bob, bobClone, { 'h.txt': 'h\n' }, 'bob hurries');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'hurry');
    const pr = await openPr(bob, 'alice.test/site', 'bob.test/site:hurry', 'Hurry');
    const set = await bob.knotless(
      'check',
      'set',
      'alice.test/site',
      change,
      '--context',
      'test',
      '--state',
      'failure',
    );
    assert.equal(set.code, 0, set.stderr);
    const res = await alice.knotless('pr', 'merge', 'alice.test/site', pr.id, '--ignore-checks');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stderr, /merged ignoring a required check: test: failing \(failure by bob\.test\)/);
    const view = json<ItemJson & { ignoredChecks?: string[] }>(
      await carol.knotless('pr', 'view', 'alice.test/site', pr.id, '--json'),
    );
    assert.equal(view.state, 'merged');
    assert.deepEqual(view.ignoredChecks, ['test: failing (failure by bob.test)']);
    const text = await carol.knotless('pr', 'view', 'alice.test/site', pr.id);
    assert.match(text.stdout, /merged {3}ignoring a required check: test: failing \(failure by bob\.test\)/);
    // A label change later keeps the override visible.
    assert.equal((await alice.knotless('pr', 'label', 'alice.test/site', pr.id, '--add', 'hotfix')).code, 0);
    const relabelled = json<ItemJson & { ignoredChecks?: string[] }>(
      await carol.knotless('pr', 'view', 'alice.test/site', pr.id, '--json'),
    );
    assert.deepEqual(relabelled.ignoredChecks, ['test: failing (failure by bob.test)']);
  });

  it('alice lifts the protection with --remove', async () => {
    const res = await alice.knotless('repo', 'protect', 'site', 'main', '--remove');
    assert.equal(res.code, 0, res.stderr);
    const shown = json<{ branches: unknown[] }>(
      await carol.knotless('repo', 'protect', 'alice.test/site', '--show', '--json'),
    );
    assert.deepEqual(shown.branches, []);
  });
});
