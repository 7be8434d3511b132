import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { NO_CLONE, json, newSite, pdsOf, tipOf, useForgeNet } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';
import { RunnerProcess as AnyRunner, checkRecords, fifo as fifoIn } from './helpers/runner.ts';

const {
  t,
  users: [alice, bob],
  env,
} = useForgeNet(['alice.test', 'bob.test']);

interface ListJson {
  checks: { context: string; state: string; runner: string; description?: string }[];
}

let clone = NO_CLONE;
let runs = '';
let scratch = '';
let head0 = '';

/** Pushes a commit whose ci.sh is `script` to alice's main; returns its id and its short form. */
async function push(script: string, message: string): Promise<{ id: string; short: string }> {
  const id = await commitFiles(alice, clone, { 'ci.sh': script }, message);
  await alice.ok(clone, 'push', '-q', 'origin', 'main');
  return { id, short: id.slice(0, 12) };
}

/** A fifo the test writes to when a run may go on: a command waits on it, not on a clock. */
function fifo(name: string): Promise<string> {
  return fifoIn(scratch, name);
}

/** Every run the command made, one commit id a line, in order. */
function runsOf(): string[] {
  return fs.readFileSync(runs, 'utf8').trim().split('\n');
}

/** bob's check records on `commit`, oldest first (straight from his PDS). */
function bobsRecords(commit: string): Promise<{ state: string; description?: string }[]> {
  return checkRecords(pdsOf(t, 'bob.test'), t.dids['bob.test']!, commit);
}

/** Every check record in bob's account (straight from his PDS). */
async function bobsChecks(): Promise<unknown[]> {
  const pds = pdsOf(t, 'bob.test');
  const out: unknown[] = [];
  let cursor = '';
  for (;;) {
    const url = `${pds}/xrpc/com.atproto.repo.listRecords?repo=${t.dids['bob.test']!}&collection=dev.knotless.check&limit=100${cursor === '' ? '' : `&cursor=${cursor}`}`;
    const page = (await (await fetch(url)).json()) as { records: unknown[]; cursor?: string };
    out.push(...page.records);
    if (page.records.length < 100 || page.cursor === undefined) return out;
    cursor = page.cursor;
  }
}

/** Waits for a runner's first line and returns its state file. */
async function stateOf(runner: AnyRunner): Promise<string> {
  const line = await runner.line(/^knotless runner: watching alice\.test\/site for test \(state and logs: /);
  return path.join(/\(state and logs: (.*)\)$/.exec(line)![1]!, 'state.json');
}

/** A `knotless runner` process as bob. */
class RunnerProcess extends AnyRunner {
  constructor(args: string[]) {
    super(args, { ...bob.env, ...env() });
  }
}

function runnerArgs(...more: string[]): string[] {
  return [
    '--repo',
    'alice.test/site',
    '--context',
    'test',
    ...more,
    '--',
    'sh',
    '-c',
    `echo "$KNOTLESS_RUNNER_COMMIT" >> '${runs}'; exec sh ci.sh`,
  ];
}

describe('knotless runner', () => {
  let first: RunnerProcess;

  it('alice has a repository; bob runs a runner for it, which checks the head it finds', async () => {
    await t.ready;
    clone = await newSite(alice, 'alice.test');
    head0 = await tipOf(alice, 'knotless://alice.test/site', 'main');
    scratch = t.tmpdir();
    runs = path.join(scratch, 'runs');
    fs.writeFileSync(runs, '');
    first = new RunnerProcess(runnerArgs());
    await first.line(/^knotless runner: watching alice\.test\/site for test \(state and logs: /);
    // The first commit has no ci.sh: `sh ci.sh` fails.
    await first.line(new RegExp(`^knotless runner: ${head0.slice(0, 12)} on main: failure \\(log: `));
  });

  it('a push turns into pending, then failure with the output in the description and the log', async () => {
    const gate = await fifo('gate-a');
    const a = await push(`read go < '${gate}'\necho "2 of 5 tests failed"\nexit 1\n`, 'break a test');
    await first.line(new RegExp(`^knotless runner: ${a.short} on main: pending$`));
    const pending = json<ListJson>(
      await alice.knotless('check', 'list', 'alice.test/site', a.id, '--runner', 'bob.test', '--json'),
    );
    assert.deepEqual(
      pending.checks.map((c) => [c.context, c.state, c.runner]),
      [['test', 'pending', 'bob.test']],
    );
    await fs.promises.writeFile(gate, 'go\n');
    const done = await first.line(
      new RegExp(`^knotless runner: ${a.short} on main: failure \\(log: (.*)\\)$`),
    );
    const log = /\(log: (.*)\)$/.exec(done)![1]!;
    assert.match(fs.readFileSync(log, 'utf8'), /^2 of 5 tests failed\n$/);
    const failed = json<ListJson>(
      await alice.knotless('check', 'list', 'alice.test/site', a.id, '--runner', 'bob.test', '--json'),
    );
    assert.deepEqual(
      failed.checks.map((c) => [c.state, c.description]),
      [['failure', 'exit 1: 2 of 5 tests failed']],
    );
  });

  it('the next push turns into success', async () => {
    const b = await push('echo "all 5 tests passed"\n', 'fix the test');
    await first.line(new RegExp(`^knotless runner: ${b.short} on main: success \\(log: `));
    const listed = json<ListJson>(
      await alice.knotless('check', 'list', 'alice.test/site', 'main', '--runner', 'bob.test', '--json'),
    );
    assert.deepEqual(
      listed.checks.map((c) => [c.state, c.description]),
      [['success', 'passed: all 5 tests passed']],
    );
  });

  it('a runner killed mid-run, started again, turns its pending into error, runs that commit again and nothing else', async () => {
    const gate = await fifo('gate-c');
    const started = await fifo('started-c');
    const c = await push(`echo started > '${started}'\nread go < '${gate}'\necho "c is fine"\n`, 'slow test');
    await first.line(new RegExp(`^knotless runner: ${c.short} on main: pending$`));
    // Killed while its command runs (the command has said so through the fifo).
    assert.equal(await fs.promises.readFile(started, 'utf8'), 'started\n');
    first.child.kill('SIGKILL');
    await first.exited;
    const second = new RunnerProcess(runnerArgs());
    await second.line(
      new RegExp(`^knotless runner: ${c.short} on main: error \\(an earlier runner stopped mid-run\\)$`),
    );
    await second.line(new RegExp(`^knotless runner: ${c.short} on main: pending$`));
    assert.equal(await fs.promises.readFile(started, 'utf8'), 'started\n');
    await fs.promises.writeFile(gate, 'go\n');
    await second.line(new RegExp(`^knotless runner: ${c.short} on main: success \\(log: `));
    assert.deepEqual(
      (await bobsRecords(c.id)).map((r) => r.state),
      ['pending', 'error', 'pending', 'success'],
    );
    const all = runsOf();
    for (const reported of new Set(all))
      assert.equal(all.filter((r) => r === reported).length, reported === c.id ? 2 : 1, all.join('\n'));
    assert.equal(new Set(all).size, 4);

    // Ctrl-C during a run: the run is recorded as an error before the runner exits.
    const gateD = await fifo('gate-d');
    const startedD = await fifo('started-d');
    const d = await push(`echo started > '${startedD}'\nread go < '${gateD}'\n`, 'a test that hangs');
    await second.line(new RegExp(`^knotless runner: ${d.short} on main: pending$`));
    assert.equal(await fs.promises.readFile(startedD, 'utf8'), 'started\n');
    second.child.kill('SIGINT');
    await second.line(new RegExp(`^knotless runner: ${d.short} on main: error \\(stopped\\)$`));
    assert.deepEqual(await second.exited, { code: 0, signal: null });
    assert.deepEqual(
      (await bobsRecords(d.id)).map((r) => r.state),
      ['pending', 'error'],
    );
  });

  it('a run over its time limit is an error, and the runner stops cleanly on SIGTERM', async () => {
    const third = new RunnerProcess(runnerArgs('--timeout', '1'));
    const d = (await tipOf(alice, 'knotless://alice.test/site', 'main')).slice(0, 12);
    // The commit the last runner was stopped on runs again, and its ci.sh waits for a fifo no one writes.
    await third.line(new RegExp(`^knotless runner: ${d} on main: pending$`));
    await third.line(new RegExp(`^knotless runner: ${d} on main: error \\(log: `));
    const listed = json<ListJson>(
      await alice.knotless('check', 'list', 'alice.test/site', 'main', '--runner', 'bob.test', '--json'),
    );
    assert.deepEqual(
      listed.checks.map((c) => [c.state, c.description]),
      [['error', 'over the time limit of 1 s']],
    );
    third.child.kill('SIGTERM');
    assert.deepEqual(await third.exited, { code: 0, signal: null });
  });

  it('a runner whose folder is lost runs nothing again that it reported (its verdicts are read from its account), and a new push still runs', async () => {
    // A fourth runner: main's head (left by the last one as an error over its time limit) is reported.
    const fourth = new RunnerProcess(runnerArgs());
    const folder = path.dirname(await stateOf(fourth));
    const g = await push('echo "g passed"\n', 'g');
    await fourth.line(new RegExp(`^knotless runner: ${g.short} on main: success \\(log: `));
    fourth.child.kill('SIGTERM');
    assert.deepEqual(await fourth.exited, { code: 0, signal: null });
    const records = (await bobsChecks()).length;
    const runs = runsOf();

    // The disk is lost: state, cache and logs. A new runner starts without them.
    fs.rmSync(folder, { recursive: true });
    const fifth = new RunnerProcess(runnerArgs());
    assert.equal(path.dirname(await stateOf(fifth)), folder);
    // A push to another branch, sorted after main: any scan that finds it finds main's head first.
    const h = await commitFiles(alice, clone, { 'ci.sh': 'echo "h passed"\n' }, 'h');
    await alice.ok(clone, 'push', '-q', 'origin', 'HEAD:zz');
    await fifth.line(new RegExp(`^knotless runner: ${h.slice(0, 12)} on zz: success \\(log: `));
    assert.deepEqual(runsOf(), [...runs, h]);
    // Two check records written (and answered) since: h's pending and success, nothing on g.
    assert.equal((await bobsChecks()).length, records + 2);
    assert.deepEqual(
      (await bobsRecords(g.id)).map((r) => r.state),
      ['pending', 'success'],
    );
    assert.ok(!fifth.lines.some((l) => l.includes(g.short)), fifth.lines.join('\n'));

    // Killed mid-run, its folder lost too: the `pending` in its account is what it left, so the
    // next runner turns it into an error and runs that commit again.
    const gate = await fifo('gate-i');
    const started = await fifo('started-i');
    const i = await push(`echo started > '${started}'\nread go < '${gate}'\necho "i is fine"\n`, 'slow i');
    await fifth.line(new RegExp(`^knotless runner: ${i.short} on main: pending$`));
    assert.equal(await fs.promises.readFile(started, 'utf8'), 'started\n');
    fifth.child.kill('SIGKILL');
    await fifth.exited;
    // The machine is lost with the disk: the command it left running goes too (else it would
    // still be reading the fifo the next run waits on).
    const left = JSON.parse(fs.readFileSync(path.join(folder, 'state.json'), 'utf8')) as {
      running?: { commit: string; pid?: number };
    };
    assert.equal(left.running?.commit, i.id);
    process.kill(-left.running.pid!, 'SIGKILL');
    fs.rmSync(folder, { recursive: true });
    const sixth = new RunnerProcess(runnerArgs());
    await sixth.line(
      new RegExp(`^knotless runner: ${i.short}: error \\(an earlier runner stopped mid-run\\)$`),
    );
    await sixth.line(new RegExp(`^knotless runner: ${i.short} on main: pending$`));
    assert.equal(await fs.promises.readFile(started, 'utf8'), 'started\n');
    await fs.promises.writeFile(gate, 'go\n');
    await sixth.line(new RegExp(`^knotless runner: ${i.short} on main: success \\(log: `));
    assert.deepEqual(
      (await bobsRecords(i.id)).map((r) => r.state),
      ['pending', 'error', 'pending', 'success'],
    );
    assert.deepEqual(runsOf(), [...runs, h, i.id, i.id]);
    assert.ok(!sixth.lines.some((l) => l.includes(h.slice(0, 12))), sixth.lines.join('\n'));
    sixth.child.kill('SIGTERM');
    assert.deepEqual(await sixth.exited, { code: 0, signal: null });
  });
});
