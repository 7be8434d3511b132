// The reference runner hears a repository's maintainers (format.md, "Teams"): carol runs a runner for
// alice's repository; alice names bob, whose account is on the other PDS, a maintainer while the
// runner runs. The runner notices him at its next listing and follows his PDS's stream, so bob's
// push (his own table, in his own account) turns into `pending`, then `success`, on his commit, the
// head of main as core's rule computes it. Once alice removes bob, the runner stops following him.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { newSite, pdsOf, tipOf, useForgeNet } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';
import { RunnerProcess, checkRecords } from './helpers/runner.ts';

const {
  t,
  users: [alice, bob, carol],
  env,
} = useForgeNet(['alice.test', 'bob.test', 'carol.test']);

describe("knotless runner and a repository's maintainers", () => {
  it("runs a maintainer's push: pending, then success, on the commit the team's rule makes main's head", async () => {
    await t.ready;
    assert.notEqual(pdsOf(t, 'alice.test'), pdsOf(t, 'bob.test'), "bob's account is on the other PDS");
    await newSite(alice, 'alice.test');
    const head0 = await tipOf(alice, 'knotless://alice.test/site', 'main');
    const scratch = t.tmpdir();
    const runs = path.join(scratch, 'runs');
    fs.writeFileSync(runs, '');
    const runner = new RunnerProcess(
      [
        '--repo',
        'alice.test/site',
        '--context',
        'test',
        '--',
        'sh',
        '-c',
        `echo "$KNOTLESS_RUNNER_COMMIT" >> '${runs}'; echo "checked $KNOTLESS_RUNNER_BRANCH"`,
      ],
      { ...carol.env, ...env() },
    );
    await runner.line(new RegExp(`^knotless runner: ${head0.slice(0, 12)} on main: success \\(log: `));

    // alice names bob while the runner runs: its listing after her table's write finds him.
    const added = await alice.knotless('repo', 'maintainer', 'add', 'site', 'bob.test');
    assert.equal(added.code, 0, added.stderr);
    const bobDid = t.dids['bob.test']!;
    await runner.line(new RegExp(`^knotless runner: following maintainer ${bobDid} of alice\\.test/site$`));

    // bob pushes main through the helper: his table, in his account, on the other PDS.
    const dir = bob.dir();
    await bob.ok(dir, 'clone', '-q', 'knotless://alice.test/site', 'w');
    const commit = await commitFiles(bob, `${dir}/w`, { 'bob.txt': 'from bob\n' }, 'bob');
    await bob.ok(`${dir}/w`, 'push', '-q', 'origin', 'main');
    assert.equal(
      await tipOf(carol, 'knotless://alice.test/site', 'main'),
      commit,
      "bob's commit is main's head",
    );
    const short = commit.slice(0, 12);
    await runner.line(new RegExp(`^knotless runner: ${short} on main: pending$`));
    await runner.line(new RegExp(`^knotless runner: ${short} on main: success \\(log: `));
    const records = await checkRecords(pdsOf(t, 'carol.test'), t.dids['carol.test']!, commit);
    assert.deepEqual(
      records.map((r) => r.state),
      ['pending', 'success'],
    );
    assert.equal(records[1]!.description, 'passed: checked main');
    assert.deepEqual(fs.readFileSync(runs, 'utf8').trim().split('\n'), [head0, commit], 'each run once');

    // alice removes bob: the runner's next listing drops him and closes his PDS's stream.
    const removed = await alice.knotless('repo', 'maintainer', 'remove', 'site', 'bob.test');
    assert.equal(removed.code, 0, removed.stderr);
    await runner.line(
      new RegExp(`^knotless runner: no longer following maintainer ${bobDid} of alice\\.test/site$`),
    );
  });
});
