import assert from 'node:assert/strict';
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { NO_CLONE, newSite, openPr, pdsOf, tipOf, useForgeNet } from './helpers/forge.ts';
import { commitFiles } from './helpers/git.ts';
import { RunnerProcess as AnyRunner, checkRecords, fifo as fifoIn } from './helpers/runner.ts';

// bob runs a runner (no relay, no appview) for alice's repository. alice and carol share the first
// PDS, whose stream the runner follows: carol's pull request is heard on it. Pushes made while the
// runner's stream is being opened (between its first listing and its subscription, first without a
// cursor, then again from its saved one) are each run once. A round the runner was killed in the
// middle of ends in a verdict at the next start; one whose verdict was written just before the
// runner was killed is never run again.
const {
  t,
  users: [alice, bob, carol],
  env,
} = useForgeNet(['alice.test', 'bob.test', 'carol.test']);

let scratch = '';
let runs = '';
let aliceClone = NO_CLONE;
let carolClone = NO_CLONE;
let prUri = '';
let prKey = '';
let state = '';

/** A `knotless runner` process as bob, with a fresh runner of context `test`. */
class RunnerProcess extends AnyRunner {
  constructor() {
    super(
      [
        '--repo',
        'alice.test/site',
        '--context',
        'test',
        '--',
        'sh',
        '-c',
        `echo "$KNOTLESS_RUNNER_COMMIT" >> '${runs}'; exec sh ci.sh`,
      ],
      { ...bob.env, ...env() },
    );
  }

  /** Waits for the runner's first line and returns its folder's state file. */
  async started(): Promise<string> {
    const line = await this.line(/^knotless runner: watching alice\.test\/site for test \(state and logs: /);
    return path.join(/\(state and logs: (.*)\)$/.exec(line)![1]!, 'state.json');
  }
}

/** Every run the command made, one commit id a line, in order. */
function runsOf(): string[] {
  return fs.readFileSync(runs, 'utf8').trim().split('\n');
}

/** bob's check records on `commit`, oldest first (straight from his PDS). */
async function bobsStates(commit: string): Promise<string[]> {
  return (await checkRecords(pdsOf(t, 'bob.test'), t.dids['bob.test']!, commit)).map((r) => r.state);
}

/**
 * Holds the event-stream subscriptions (`subscribeRepos`) the first PDS (alice's and carol's) is
 * asked for, until released: the PDS's own HTTP server, in this process, answers each upgrade only
 * then, so the test decides what is written between a runner's first listing and its subscription.
 */
class StreamGate {
  readonly #server: http.Server;
  readonly #inner: ((...args: unknown[]) => void)[];
  #held: (() => void)[] = [];
  #closed = false;
  #arrived: (() => void) | undefined;

  constructor(server: http.Server) {
    this.#server = server;
    this.#inner = server.listeners('upgrade') as ((...args: unknown[]) => void)[];
    server.removeAllListeners('upgrade');
    server.on('upgrade', (req: http.IncomingMessage, ...rest: unknown[]) => {
      const pass = () => {
        for (const l of this.#inner) l.call(server, req, ...rest);
      };
      if (!this.#closed || !(req.url ?? '').includes('com.atproto.sync.subscribeRepos')) return pass();
      this.#held.push(pass);
      this.#arrived?.();
    });
  }

  /** From now on, subscriptions wait for {@link open}. */
  close(): void {
    this.#closed = true;
  }

  /** Resolves once a subscription is being held. */
  async arrived(): Promise<void> {
    while (this.#held.length === 0) await new Promise<void>((resolve) => (this.#arrived = resolve));
  }

  /** Lets the held subscriptions through, and the later ones. */
  open(): void {
    this.#closed = false;
    for (const pass of this.#held.splice(0)) pass();
  }

  /** Gives the PDS its own listeners back. */
  restore(): void {
    this.open();
    this.#server.removeAllListeners('upgrade');
    for (const l of this.#inner) this.#server.on('upgrade', l);
  }
}

/** Pushes a commit whose ci.sh is `script` to alice's main; returns its id. */
async function push(script: string, message: string): Promise<string> {
  const id = await commitFiles(alice, aliceClone, { 'ci.sh': script }, message);
  await alice.ok(aliceClone, 'push', '-q', 'origin', 'main');
  return id;
}

/** A line of the runner's for a run of alice's main: `<commit> on main: <rest>`. */
const onMain = (commit: string, rest: string) =>
  new RegExp(`^knotless runner: ${commit.slice(0, 12)} on main: ${rest}`);

/** A line of the runner's for a round of carol's pull request. */
const ofRound = (commit: string, round: number, rest: string) =>
  new RegExp(
    `^knotless runner: ${commit.slice(0, 12)} of pull request carol\\.test/${prKey} \\(round ${round}\\): ${rest}`,
  );

describe('knotless runner: pull requests on the same PDS, runs cut short, events while the stream opens', () => {
  let gate: StreamGate | undefined;
  after(() => gate?.restore());
  let runner: RunnerProcess;

  /**
   * carol's next round of her pull request, whose test says it began and then waits until `go` is
   * written: pushed, the pull request updated, its round seen pending and its command under way.
   */
  async function slowRound(
    tag: string,
    round: number,
    said: string,
    message: string,
  ): Promise<{ head: string; go: string; began: string }> {
    const go = await fifoIn(scratch, `go${tag}`);
    const began = await fifoIn(scratch, `began${tag}`);
    const head = await commitFiles(
      carol,
      carolClone,
      { 'ci.sh': `echo began > '${began}'\nread x < '${go}'\necho "${said}"\n` },
      message,
    );
    await carol.ok(carolClone, 'push', '-q', 'origin', 'fix');
    assert.equal((await carol.knotless('pr', 'update', 'alice.test/site', prKey)).code, 0);
    await runner.line(ofRound(head, round, 'pending$'));
    assert.equal(await fs.promises.readFile(began, 'utf8'), 'began\n');
    return { head, go, began };
  }

  it("a push made between the runner's first listing and its subscription is run, once", async () => {
    await t.ready;
    // alice and carol on the first PDS (the one whose server is in this process), bob on the second.
    assert.equal(pdsOf(t, 'alice.test'), t.net.pdsUrl);
    assert.equal(pdsOf(t, 'carol.test'), t.net.pdsUrl);
    assert.notEqual(pdsOf(t, 'bob.test'), t.net.pdsUrl);
    aliceClone = await newSite(alice, 'alice.test');
    const head0 = await tipOf(alice, 'knotless://alice.test/site', 'main');
    scratch = t.tmpdir();
    runs = path.join(scratch, 'runs');
    fs.writeFileSync(runs, '');
    gate = new StreamGate(t.net.pdsServer);
    gate.close();
    runner = new RunnerProcess();
    // Its first listing found main's head (no ci.sh: a failure) while its subscription waits.
    await runner.line(onMain(head0, 'failure \\(log: '));
    await gate.arrived();
    const x = await push('echo "x passed"\n', 'x');
    gate.open();
    // It says it is watching once its stream is open.
    state = await runner.started();
    await runner.line(onMain(x, 'success \\(log: '));
    // The next push is heard on the stream, after x: x was not run a second time before it.
    const y = await push('echo "y passed"\n', 'y');
    await runner.line(onMain(y, 'success \\(log: '));
    assert.deepEqual(runsOf(), [head0, x, y]);
    assert.deepEqual(await bobsStates(x), ['pending', 'success']);
  });

  it("carol's pull request, in an account on alice's PDS, is heard on its stream without --relay and run", async () => {
    assert.equal((await carol.knotless('repo', 'fork', 'alice.test/site')).code, 0);
    const dir = carol.dir();
    await carol.ok(dir, 'clone', '-q', 'knotless://carol.test/site', 'c');
    carolClone = path.join(dir, 'c');
    await carol.ok(carolClone, 'switch', '-q', '-c', 'fix');
    const head = await commitFiles(carol, carolClone, { 'ci.sh': 'echo "carol: passed"\n' }, 'carol: ci');
    await carol.ok(carolClone, 'push', '-q', 'origin', 'fix');
    const pr = await openPr(carol, 'alice.test/site', 'site:fix', 'Carol fixes');
    prUri = pr.uri;
    prKey = pr.uri.split('/').at(-1)!;
    await runner.line(ofRound(head, 0, 'pending$'));
    await runner.line(ofRound(head, 0, 'success \\(log: '));
    assert.equal(runsOf().at(-1), head);
    assert.deepEqual(await bobsStates(head), ['pending', 'success']);
  });

  it('a runner killed in the middle of a round finishes it when started again: error, then run again to its verdict', async () => {
    const { head, go, began } = await slowRound('', 1, 'carol 2: passed', 'carol: a slow test');
    // Killed while its command runs (the command has said so through the fifo).
    runner.child.kill('SIGKILL');
    await runner.exited;
    assert.deepEqual(await bobsStates(head), ['pending']);
    runner = new RunnerProcess();
    await runner.started();
    // Named as its other lines name it, by the author's handle and the round.
    const recovered = await runner.line(new RegExp(`^knotless runner: ${head.slice(0, 12)} .*: error \\(`));
    assert.match(recovered, ofRound(head, 1, 'error \\(an earlier runner stopped mid-run\\)$'));
    await runner.line(ofRound(head, 1, 'pending$'));
    assert.equal(await fs.promises.readFile(began, 'utf8'), 'began\n');
    await fs.promises.writeFile(go, 'go\n');
    await runner.line(ofRound(head, 1, 'success \\(log: '));
    assert.deepEqual(await bobsStates(head), ['pending', 'error', 'pending', 'success']);
    assert.deepEqual(
      runsOf().filter((c) => c === head),
      [head, head],
    );
  });

  it('a round whose verdict was written just before the runner was killed is not run again, and pushes while its stream reopens from its cursor run once', async () => {
    const round = runsOf().at(-1)!;
    runner.child.kill('SIGTERM');
    assert.deepEqual(await runner.exited, { code: 0, signal: null });
    // The state a runner killed between writing the round's verdict and noting it leaves: the run
    // still under way, its verdict not among those reported (no signal lands in that window on cue).
    const saved = JSON.parse(fs.readFileSync(state, 'utf8')) as {
      cursor?: number;
      done: [string, string][];
      running?: unknown;
    };
    assert.equal(typeof saved.cursor, 'number');
    saved.done = saved.done.filter(([c]) => c !== round);
    const label = `of pull request carol.test/${prKey} (round 1)`;
    saved.running = { commit: round, branch: 'main', pid: 2 ** 22 + 1, pull: prUri, label };
    fs.writeFileSync(state, JSON.stringify(saved));
    const before = runsOf().length;

    gate!.close();
    runner = new RunnerProcess();
    // What it makes of the run left under way: the verdict found in bob's account, not a new run.
    const recovered = await runner.line(
      new RegExp(`^knotless runner: ${round.slice(0, 12)} .*: (success|error) \\(`),
    );
    assert.match(recovered, ofRound(round, 1, 'success \\(reported before an earlier runner stopped\\)$'));
    await gate!.arrived();
    // Pushed while the subscription, from the saved cursor, waits: the stream replays it and the
    // listing made once it is open finds it too; it runs once.
    const z = await push('echo "z passed"\n', 'z');
    gate!.open();
    await runner.started();
    await runner.line(onMain(z, 'success \\(log: '));
    const w = await push('echo "w passed"\n', 'w');
    await runner.line(onMain(w, 'success \\(log: '));
    assert.deepEqual(runsOf().slice(before), [z, w]);
    assert.deepEqual(await bobsStates(round), ['pending', 'error', 'pending', 'success']);
    assert.deepEqual(await bobsStates(z), ['pending', 'success']);
    assert.ok(
      !runner.lines.some((l) => l.includes(round.slice(0, 12)) && / pending$/.test(l)),
      runner.lines.join('\n'),
    );
  });

  it("a round made while the pull request's previous round runs is run after it", async () => {
    const { head: slow, go } = await slowRound('-2', 2, 'carol 3: passed', 'carol: another slow test');
    // While round 2 runs, carol makes round 3, then alice pushes: the stream carries them in that
    // order, so once alice's push has run, round 3 has been heard and queued before it.
    const next = await commitFiles(carol, carolClone, { 'ci.sh': 'echo "carol 4: passed"\n' }, 'carol: fast');
    await carol.ok(carolClone, 'push', '-q', 'origin', 'fix');
    assert.equal((await carol.knotless('pr', 'update', 'alice.test/site', prKey)).code, 0);
    const v = await push('echo "v passed"\n', 'v');
    await fs.promises.writeFile(go, 'go\n');
    await runner.line(ofRound(slow, 2, 'success \\(log: '));
    await runner.line(onMain(v, 'success \\(log: '));
    assert.ok(
      runner.lines.some((l) => ofRound(next, 3, 'success \\(log: ').test(l)),
      runner.lines.join('\n'),
    );
    assert.deepEqual(runsOf().slice(-3), [slow, next, v]);
    runner.child.kill('SIGTERM');
    assert.deepEqual(await runner.exited, { code: 0, signal: null });
  });
});
