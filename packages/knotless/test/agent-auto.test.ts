import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, startTraffic, type Proxy } from 'knotless-devnet';
import { agentView, alive } from './helpers/agent.ts';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { waitUntil } from './helpers/wait.ts';

// The agent starts itself: the first push starts it in the background, the next one uses it.
const t = useNetwork(['alice.test', 'bob.test']);
let proxy: Proxy | undefined;
const via = () => (proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url });
/** A user whose pushes start the agent (30 s idle: long enough for a test, short if one leaks). */
const auto = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  KNOTLESS_AGENT_IDLE: '30',
  ...via(),
}));
/** The same, with the agent turned off. */
const off = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_AGENT: '0', ...via() }));
/** More users with agents of their own (their own caches), for the tests that break one. */
const more = [1, 2, 3, 4, 5].map(() =>
  useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0', KNOTLESS_AGENT_IDLE: '30', ...via() })),
);

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
});
after(() => proxy?.close());

interface Status {
  running: boolean;
  pid?: number;
  build?: string;
  socket?: string;
}

async function status(user: GitUser): Promise<Status> {
  const res = await user.knotless('agent', 'status', '--json');
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout) as Status;
}

/**
 * Waits for `check`, a precondition of the test: with no clock of its own (another process's
 * pace depends on the machine's load); one that never comes is caught by the runner's limit, and
 * the wait names itself on stderr meanwhile (helpers/wait.ts).
 */
async function until(check: () => Promise<boolean> | boolean, what: string): Promise<void> {
  await waitUntil(what, async () => ((await check()) ? true : undefined));
}

const agentDir = (user: GitUser) => path.join(user.env['KNOTLESS_CACHE_DIR']!, 'agent');
const agentLog = (user: GitUser) => fs.readFileSync(path.join(agentDir(user), 'agent.log'), 'utf8');

/** Requests and new connections at the PDS while `run` runs. */
async function cost(run: () => Promise<unknown>): Promise<{ requests: string[]; connections: number }> {
  proxy!.reset();
  await run();
  return { requests: proxy!.requests.map((r) => r.nsid ?? r.path), connections: proxy!.connections };
}

describe('the agent starts itself', () => {
  // Every agent these tests started is stopped before the network closes (the PDS waits for open
  // event streams), and none may be left behind.
  // An agent may be leaving by itself meanwhile (KNOTLESS_AGENT_IDLE): `agent stop` then finds no
  // socket, while its process is still ending. One left running never ends: the wait names it.
  after(async () => {
    for (const user of [auto, off, ...more]) {
      const s = await status(user);
      if (!s.running) continue;
      assert.equal((await user.knotless('agent', 'stop')).code, 0);
      await until(() => !alive(s.pid!), `agent ${s.pid} to end`);
    }
  });

  for (const [label, user] of [
    ['with the agent on', auto],
    ['with KNOTLESS_AGENT=0', off],
  ] as const) {
    it(`a first push, then a second once the agent it started is up (${label})`, async () => {
      assert.equal((await status(user)).running, false);
      const name = `auto-${user === auto ? 'on' : 'off'}`;
      assert.equal((await user.knotless('repo', 'create', name)).code, 0);
      const dir = await newRepo(user, `knotless://alice.test/${name}`);
      await commitFiles(user, dir, { a: '1' }, 'one');
      // A PDS with other accounts writing, as every hosted PDS is: the agent's event stream proves
      // itself live by its first message (agent/stream.ts), which a quiet PDS sends only at its next
      // commit. Bob writes straight to the PDS, so the proxy counts only alice's requests.
      const traffic = await startTraffic(
        t.net.pdsUrl,
        [{ did: t.dids['bob.test']!, handle: 'bob.test' }],
        t.password,
        {
          pauseMs: 250,
        },
      );
      after(() => traffic.stop());
      // The first push goes direct: it lists and writes, and starts the agent once git has its answer.
      const first = await cost(() => user.ok(dir, 'push', '-q', 'origin', 'main'));
      // Its listing and the ref table's proof are read side by side, before any write.
      assert.deepEqual(first.requests.slice(0, 2).sort(), [
        'com.atproto.repo.listRecords',
        'com.atproto.sync.getRecord',
      ]);
      await commitFiles(user, dir, { a: '2' }, 'two');
      if (user === auto) {
        // The agent the first push started, once it answers and has listed: what is measured next is
        // the warm push, not the start's speed.
        await until(async () => (await status(user)).running, 'the agent the first push started');
        const s = await status(user);
        // git's pipes are not among its descriptors (else git would wait on them until it exits).
        for (const fd of [0, 1, 2]) {
          const target = fs.readlinkSync(`/proc/${s.pid!}/fd/${fd}`);
          assert.doesNotMatch(target, /^(pipe|socket):/, `the agent's fd ${fd} is ${target}`);
        }
        const q = { did: t.dids['alice.test']!, repo: name, pds: t.net.pdsUrl };
        await until(async () => (await agentView(s.socket!, q)) !== null, "the agent's first listing");
      } else assert.equal((await status(user)).running, false);
      const second = await cost(() => user.ok(dir, 'push', '-q', 'origin', 'main'));
      if (user === auto) {
        // git is answered from the view at once, and the write proves it (its swapCommit is the
        // commit the view is at): one request, on the agent's open connection.
        assert.deepEqual(second, {
          requests: ['com.atproto.repo.putRecord'],
          connections: 0,
        });
        // The second helper found the agent with a stat: it started no other.
        const log = agentLog(user);
        assert.equal(log.match(/^ready$/gm)?.length, 1, log);
        assert.doesNotMatch(log, /not needed/);
        // Bob's commits filled the stream; the agent decoded only frames that name alice (her
        // pushes' commits), the rest it dropped before decoding their bodies (agent/stream.ts).
        // Enough of bob's commits after the agent went live, counted, not hoped for in a pause.
        const live = traffic.writes;
        await until(() => traffic.writes >= live + 6, "six more of bob's commits");
        assert.equal((await user.knotless('agent', 'stop')).code, 0);
        const counts = /: (\d+) frames read, (\d+) decoded$/m.exec(agentLog(user));
        assert.ok(counts !== null, agentLog(user));
        const [read, decoded] = [Number(counts[1]), Number(counts[2])];
        // Alice's own commits may all have reached the view another way (its listing, or the writes
        // it forwarded) before the stop: at most they are decoded, never bob's. That the filter keeps
        // every frame naming her is stream-filter.test.ts's, on frames the PDS's encoder made.
        assert.ok(decoded <= 3, `${decoded} frames decoded`);
        assert.ok(read - decoded >= 5, `${read} frames read, ${decoded} decoded`);
      } else {
        // A cold push to the repository's ref table (where repo create starts it): the listing and
        // the table's proof side by side (up to two connections), then the table's one write, swapped
        // on the CID that proof holds: nothing is read after it.
        assert.deepEqual(second.requests.slice(0, 2).sort(), [
          'com.atproto.repo.listRecords',
          'com.atproto.sync.getRecord',
        ]);
        assert.deepEqual(second.requests.slice(2), ['com.atproto.repo.putRecord']);
        assert.ok(second.connections >= 1 && second.connections <= 2, `${second.connections} connections`);
        assert.equal(fs.existsSync(agentDir(user)), false);
      }
    });
  }

  /**
   * Runs `act` while the proxy holds its first record write, and checks that no agent had been started
   * by then (a started agent's log is made first); then that the one `act` started runs.
   */
  async function startsOnlyAfterItsWrite(
    user: GitUser,
    act: () => Promise<{ code: number | null; stderr: string }>,
  ) {
    // A first push writes the repository's ref table (on ref records, its ref and HEAD in one
    // applyWrites); `repo commit` one record.
    const writes = ['com.atproto.repo.applyWrites', 'com.atproto.repo.putRecord'];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    proxy!.reset();
    for (const nsid of writes) proxy!.inject({ nsid, fault: { kind: 'hold', until: held } });
    const done = act();
    try {
      await until(() => writes.some((w) => proxy!.count(w) > 0), 'the write');
      // Everything done but the write's answer: no agent was started.
      assert.equal(fs.existsSync(path.join(agentDir(user), 'agent.log')), false);
    } finally {
      release();
      proxy!.clearFaults();
    }
    const res = await done;
    assert.equal(res.code, 0, res.stderr);
    await until(async () => (await status(user)).running, 'the agent it started');
  }

  it("is started by a push only once git has the push's answer, not beside its work", async () => {
    const user = more[3]!;
    assert.equal((await user.knotless('repo', 'create', 'auto-after')).code, 0);
    const dir = await newRepo(user, 'knotless://alice.test/auto-after');
    await commitFiles(user, dir, { a: '1' }, 'one');
    await startsOnlyAfterItsWrite(user, () => user.git(dir, 'push', '-q', 'origin', 'main'));
  });

  it('is started by `repo commit` only once its commit is made', async () => {
    const user = more[4]!;
    assert.equal((await user.knotless('repo', 'create', 'auto-commit')).code, 0);
    const file = path.join(user.dir(), 'a.txt');
    fs.writeFileSync(file, 'one\n');
    await startsOnlyAfterItsWrite(user, () =>
      user.knotless('repo', 'commit', 'auto-commit', '-m', 'one', '--add', `a.txt=${file}`),
    );
  });

  it('of helpers racing to start it, exactly one agent runs', async () => {
    const user = more[0]!;
    const contenders = [1, 2, 3, 4].map(() => {
      const child = spawn(process.execPath, [KNOTLESS_BIN, 'agent', '--auto'], {
        env: { ...user.env, KNOTLESS_AGENT_IDLE: '30', ...via() },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
      return { child, out: () => out, err: () => err };
    });
    // Each either says ready (it listens) or exits: wait for all four to decide.
    await until(
      () => contenders.every((c) => /^ready$/m.test(c.out()) || c.child.exitCode !== null),
      'every contender to decide',
    );
    const running = contenders.filter((c) => c.child.exitCode === null);
    assert.equal(running.length, 1, contenders.map((c) => c.err()).join('\n'));
    for (const c of contenders.filter((c) => c.child.exitCode !== null)) {
      assert.equal(c.child.exitCode, 0);
      assert.match(c.err(), /another agent already listens .*; this one is not needed/);
    }
    assert.equal((await status(user)).pid, running[0]!.child.pid);
    // `agent stop` returns once the process has ended.
    const exited = new Promise((r) => running[0]!.child.once('exit', r));
    const stop = await user.knotless('agent', 'stop');
    assert.match(stop.stdout, /^stopped the agent/m);
    assert.equal(running[0]!.child.exitCode === null ? await exited : running[0]!.child.exitCode, 0);
    assert.equal((await status(user)).running, false);
  });

  it('replaces the agent of another build: the new one asks it to leave once idle', async () => {
    const user = more[1]!;
    const dir = agentDir(user);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // An agent listening at another build's socket in the agent's directory (a real one: only its
    // socket's name says another build, which is all a helper looks at).
    const old = spawn(
      process.execPath,
      [KNOTLESS_BIN, 'agent', '--socket', path.join(dir, '0.0.1-old.sock')],
      {
        env: { ...user.env, ...via() },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let oldErr = '';
    old.stderr.setEncoding('utf8').on('data', (d: string) => (oldErr += d));
    let oldOut = '';
    old.stdout.setEncoding('utf8').on('data', (d: string) => (oldOut += d));
    await until(() => /^ready$/m.test(oldOut), 'the old agent');
    const oldGone = new Promise<number | null>((r) => old.once('exit', r));
    assert.equal((await status(user)).running, false, 'a helper of this build does not use it');

    assert.equal((await user.knotless('repo', 'create', 'replaced')).code, 0);
    const repo = await newRepo(user, 'knotless://alice.test/replaced');
    await commitFiles(user, repo, { a: '1' }, 'one');
    await user.ok(repo, 'push', '-q', 'origin', 'main');
    await until(async () => (await status(user)).running, 'the new agent');
    assert.equal(await oldGone, 0);
    assert.match(oldErr, /stopping: an agent of another build started/);
    assert.equal(fs.existsSync(path.join(dir, '0.0.1-old.sock')), false);
    assert.match((await status(user)).build!, /^\d+\.\d+\.\d+-[0-9a-f]{10}$/);
  });

  it('refuses an agent directory others can write or another user owns, with one sentence, and pushes direct', async () => {
    const user = more[2]!;
    const dir = agentDir(user);
    fs.mkdirSync(dir, { recursive: true });
    fs.chmodSync(dir, 0o777);
    assert.equal((await user.knotless('repo', 'create', 'refused')).code, 0);
    const repo = await newRepo(user, 'knotless://alice.test/refused');
    await commitFiles(user, repo, { a: '1' }, 'one');
    const res = await user.git(repo, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    const said = res.stderr.split('\n').filter((l) => l.startsWith('knotless:'));
    assert.deepEqual(said, [
      `knotless: warning: The warm agent's ${dir} is writable by other users (mode 777), so knotless will not use it; run \`chmod 700 ${dir}\`.`,
    ]);
    assert.deepEqual(fs.readdirSync(dir), [], 'no agent was started there');
    const st = await user.knotless('agent', 'status');
    assert.equal(st.code, 5);
    assert.match(st.stderr, /writable by other users/);

    // Another user's directory (only root can make one here): refused the same way.
    if (process.getuid?.() === 0) {
      fs.chmodSync(dir, 0o700);
      fs.chownSync(dir, 4242, 4242);
      await commitFiles(user, repo, { a: '2' }, 'two');
      const res2 = await user.git(repo, 'push', 'origin', 'main');
      assert.equal(res2.code, 0, res2.stderr);
      assert.match(
        res2.stderr,
        /^knotless: warning: The warm agent's .* belongs to another user \(uid 4242\)/m,
      );
      assert.deepEqual(fs.readdirSync(dir), []);
      fs.chownSync(dir, 0, 0);
    }
  });

  it('never starts an agent when the socket is set by hand (KNOTLESS_AGENT_SOCKET): that one you run yourself', async () => {
    const user = more[0]!;
    const socket = path.join(user.dir(), 'mine.sock');
    assert.equal((await user.knotless('repo', 'create', 'by-hand')).code, 0);
    const repo = await newRepo(user, 'knotless://alice.test/by-hand');
    await commitFiles(user, repo, { a: '1' }, 'one');
    // The same push without the variable starts one (the first test); with it, none anywhere.
    const res = await runProcess('git', ['push', '-q', 'origin', 'main'], {
      env: { ...user.env, KNOTLESS_AGENT_SOCKET: socket, KNOTLESS_AGENT_IDLE: '30', ...via() },
      cwd: repo,
    });
    assert.equal(res.code, 0, res.stderr);
    assert.equal(fs.existsSync(socket), false);
    assert.equal((await status(user)).running, false);
  });

  it('exits by itself after KNOTLESS_AGENT_IDLE seconds without a request', async () => {
    const user = more[2]!;
    fs.chmodSync(agentDir(user), 0o700);
    const child = spawn(process.execPath, [KNOTLESS_BIN, 'agent', '--auto'], {
      env: { ...user.env, KNOTLESS_AGENT_IDLE: '1', ...via() },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const code = await new Promise((r) => child.once('exit', r));
    assert.equal(code, 0);
    assert.match(err, /stopping: idle for 1 s/);
    assert.equal((await status(user)).running, false);
  });
});
