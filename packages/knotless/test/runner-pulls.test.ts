import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { startRelay, type Relay } from 'knotless-devnet';
import { NO_CLONE, json, newSite, openPr, pdsOf, tipOf, useForgeNet } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';
import { RunnerProcess, checkRecords } from './helpers/runner.ts';

// alice's repository on the first PDS, bob's fork on the second: his pull request is in his
// account, on a PDS whose stream the owner's does not carry, so the runner hears it on a relay.
const {
  t,
  users: [alice, bob],
  env,
} = useForgeNet(['alice.test', 'bob.test']);

interface ListJson {
  checks: { context: string; state: string; runner: string; trusted: boolean; description?: string }[];
}

let relay: Relay | undefined;

describe('knotless runner on pull requests from other accounts', () => {
  // Inside the describe, so that it runs before the network's own teardown: a PDS stops only once
  // the relay no longer follows it.
  after(() => relay?.close());
  let runner: RunnerProcess;
  let runs = '';
  let bobClone = NO_CLONE;
  let prId = '';

  /** Every run the command made: its commit and pull request, one a line, in order. */
  const runsOf = (): string[] => fs.readFileSync(runs, 'utf8').trim().split('\n');

  it("alice runs a runner for her repository, following a relay; it checks main's head", async () => {
    await t.ready;
    relay = await startRelay({ pdses: t.net.pdses.map((p) => p.url) });
    await newSite(alice, 'alice.test');
    const head0 = await tipOf(alice, 'knotless://alice.test/site', 'main');
    runs = path.join(t.tmpdir(), 'runs');
    fs.writeFileSync(runs, '');
    runner = new RunnerProcess(
      [
        '--repo',
        'alice.test/site',
        '--context',
        'test',
        '--relay',
        relay.url,
        '--',
        'sh',
        '-c',
        `echo "$KNOTLESS_RUNNER_COMMIT $KNOTLESS_RUNNER_BRANCH $KNOTLESS_RUNNER_PULL" >> '${runs}'; exec sh ci.sh`,
      ],
      { ...alice.env, ...env() },
    );
    await runner.line(/^knotless runner: watching alice\.test\/site for test \(state and logs: /);
    // main has no ci.sh: `sh ci.sh` fails.
    await runner.line(new RegExp(`^knotless runner: ${head0.slice(0, 12)} on main: failure \\(log: `));
  });

  it("bob's pull request from his fork turns into pending, then success on its round's head", async () => {
    assert.equal((await bob.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://bob.test/site', 'c');
    bobClone = path.join(dir, 'c');
    await bob.ok(bobClone, 'switch', '-q', '-c', 'fix');
    const head = await commitFiles(bob, bobClone, { 'ci.sh': 'echo "bob: all tests passed"\n' }, 'add ci');
    await bob.ok(bobClone, 'push', '-q', 'origin', 'fix');
    const pr = await openPr(bob, 'alice.test/site', 'site:fix', 'Add CI');
    prId = pr.id;
    const [, rkey] = pr.id.split('/');
    const label = `of pull request bob\\.test/${rkey} \\(round 0\\)`;
    await runner.line(new RegExp(`^knotless runner: ${head.slice(0, 12)} ${label}: pending$`));
    await runner.line(new RegExp(`^knotless runner: ${head.slice(0, 12)} ${label}: success \\(log: `));
    assert.deepEqual(
      (await checkRecords(pdsOf(t, 'alice.test'), t.dids['alice.test']!, head)).map((r) => r.state),
      ['pending', 'success'],
    );
    const listed = json<ListJson>(await alice.knotless('check', 'list', 'alice.test/site', head, '--json'));
    assert.deepEqual(
      listed.checks.map((c) => [c.context, c.state, c.runner, c.trusted, c.description]),
      [['test', 'success', 'alice.test', true, 'passed: bob: all tests passed']],
    );
    assert.equal(runsOf().at(-1), `${head} main ${pr.uri}`);
  });

  it("bob's next round is run too, and a failing one turns into failure", async () => {
    const head = await commitFiles(
      bob,
      bobClone,
      { 'ci.sh': 'echo "bob: 1 test failed"\nexit 3\n' },
      'break',
    );
    await bob.ok(bobClone, 'push', '-q', 'origin', 'fix');
    assert.equal((await bob.knotless('pr', 'update', 'alice.test/site', prId)).code, 0);
    const label = `of pull request bob\\.test/${prId.split('/')[1]} \\(round 1\\)`;
    await runner.line(new RegExp(`^knotless runner: ${head.slice(0, 12)} ${label}: pending$`));
    await runner.line(new RegExp(`^knotless runner: ${head.slice(0, 12)} ${label}: failure \\(log: `));
    assert.deepEqual(
      (await checkRecords(pdsOf(t, 'alice.test'), t.dids['alice.test']!, head)).map((r) => [
        r.state,
        r.description,
      ]),
      [
        ['pending', `running on ${os.hostname()}`],
        ['failure', 'exit 3: bob: 1 test failed'],
      ],
    );
    // Each commit ran once: main's head, then each round's.
    assert.equal(runsOf().length, 3);
    runner.child.kill('SIGTERM');
    assert.deepEqual(await runner.exited, { code: 0, signal: null });
  });

  it('a runner started after bob opened his pull request, with a relay and no appview, finds it through the relay and runs its last round once', async () => {
    // A new context: a runner of its own, its first start, without a cursor of the relay's stream,
    // whose stream says nothing of bob's pull request, opened before.
    const lintRuns = path.join(t.tmpdir(), 'lint-runs');
    fs.writeFileSync(lintRuns, '');
    const lint = new RunnerProcess(
      [
        '--repo',
        'alice.test/site',
        '--context',
        'lint',
        '--relay',
        relay!.url,
        '--',
        'sh',
        '-c',
        `echo "$KNOTLESS_RUNNER_COMMIT" >> '${lintRuns}'; exec sh ci.sh`,
      ],
      { ...alice.env, ...env() },
    );
    const [, rkey] = prId.split('/');
    const round = await tipOf(bob, 'knotless://bob.test/site', 'fix');
    const label = `of pull request bob\\.test/${rkey} \\(round 1\\)`;
    await lint.line(
      /^knotless runner: pull requests opened before this first start: 1 open on alice\.test\/site in the 1 other account the relay lists as holding pull requests$/,
    );
    await lint.line(new RegExp(`^knotless runner: ${round.slice(0, 12)} ${label}: failure \\(log: `));
    const main = await tipOf(alice, 'knotless://alice.test/site', 'main');
    await lint.line(new RegExp(`^knotless runner: ${main.slice(0, 12)} on main: failure \\(log: `));
    lint.child.kill('SIGTERM');
    assert.deepEqual(await lint.exited, { code: 0, signal: null });
    assert.deepEqual(fs.readFileSync(lintRuns, 'utf8').trim().split('\n').sort(), [main, round].sort());
    assert.deepEqual(
      (await checkRecords(pdsOf(t, 'alice.test'), t.dids['alice.test']!, round)).map((r) => r.state),
      ['pending', 'failure', 'pending', 'failure'],
    );
  });
});
