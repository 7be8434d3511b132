import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NO_CLONE, json, newSite, tipOf, useForgeNet } from './helpers/forge.ts';

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
    assert.deepEqual(shown.branches, [
      {
        branch: 'main',
        requiredChecks: ['test'],
        trustedRunners: [t.dids['bob.test']],
        allowForcePush: false,
        allowDeletion: false,
      },
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

  it('alice lifts the protection with --remove', async () => {
    const res = await alice.knotless('repo', 'protect', 'site', 'main', '--remove');
    assert.equal(res.code, 0, res.stderr);
    const shown = json<{ branches: unknown[] }>(
      await carol.knotless('repo', 'protect', 'alice.test/site', '--show', '--json'),
    );
    assert.deepEqual(shown.branches, []);
  });
});
