import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { packageRoot } from '../src/paths.ts';
import { countSessions, spawnAgent, type RunningAgent, type SessionCounter } from './helpers/agent.ts';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { putRaw } from './helpers/forge.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// git's stdout and stderr often share one pipe (`git ls-remote URL 2>&1 | less`, every CI log), and
// the helper inherits git's stderr. A Node stream on that pipe turns it non-blocking for git too,
// and git, finding it full, dropped most of its output with exit 0. Here a reader takes the first
// byte, then sleeps before reading on, so the pipe fills while git writes; every line must arrive,
// as from a bare repository over file://, and the pipe's flags must be as they were.
const REFS = 3000;
const t = useNetwork(['alice.test']);
let agent: RunningAgent | undefined;
// Through the agent, helpers reach it through a relay that counts the sessions it took.
let relay: SessionCounter | undefined;
/** The thin helper the suite running now asks for: KNOTLESS_THIN=node for the Node one, else Perl's. */
let thinEnv: Record<string, string> = {};
const agentEnv = (): Record<string, string> => ({
  ...thinEnv,
  ...(relay === undefined ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: relay.socket }),
});
/** The command git runs (the npm bin): the thin helper in Perl or in Node, or the whole helper. */
const HELPER = path.join(packageRoot(), 'bin', 'git-remote-knotless');
const alice = useGitUser(t, 'alice.test', agentEnv);
/** alice's environment with the agent's setting, for the processes started here without `alice.git`. */
const aliceEnv = (): Record<string, string> => ({ ...alice.env, ...agentEnv() });

let url = '';
let bare = '';

let prepared: Promise<void> | undefined;

/** The repository (made once, by the first suite: root hooks, alice's login among them, run side by side). */
async function prepare(): Promise<void> {
  const made = await alice.knotless('repo', 'create', 'pipes');
  assert.equal(made.code, 0, made.stderr);
  url = 'knotless://alice.test/pipes';
  const dir = await newRepo(alice, url);
  const commits: string[] = [];
  for (let i = 0; i < 10; i++) commits.push(await commitFiles(alice, dir, { 'f.txt': `${i}\n` }, `c${i}`));
  const lines = Array.from({ length: REFS - 1 }, (_, i) => `create refs/heads/b/${i} ${commits[i % 10]}`);
  const ref = await runProcess('git', ['update-ref', '--stdin'], {
    cwd: dir,
    env: alice.env,
    input: lines.join('\n') + '\n',
  });
  assert.equal(ref.code, 0, ref.stderr);
  await alice.ok(dir, 'push', '-q', 'origin', 'refs/heads/*:refs/heads/*');
  bare = path.join(alice.dir(), 'bare.git');
  await alice.ok(dir, 'clone', '-q', '--bare', dir, bare);
  // One record the helper warns about on stderr each time it lists: its target is no object id.
  await putRaw(t, 'alice.test', 'dev.knotless.ref', 'pipes~bad', {
    $type: 'dev.knotless.ref',
    repo: 'pipes',
    ref: 'refs/heads/bad',
    target: 'not-an-id',
    packs: [],
    updatedAt: new Date().toISOString(),
  });
}

after(async () => {
  await relay?.close();
  await agent?.stop();
});

/**
 * Runs `git <args> 2>&1` in `cwd` into a reader that takes one byte, then sleeps before reading the
 * rest, so that the pipe fills while git writes. Returns git's lines (`$REMOTE` for the URL), its
 * exit status, and whether the pipe git writes to was ever seen non-blocking while it ran (read from
 * /proc every few milliseconds: the flag belongs to the pipe, so any process writing to it shows it).
 */
async function throughSlowReader(
  cwd: string,
  remote: string,
  args: string[],
): Promise<{ lines: string[]; code: string; nonBlocking: string[] }> {
  const pipeFile = path.join(t.tmpdir(), 'pipe');
  // fd 3 is a copy of the pipe for readlink to name (its fd 1 goes to the file).
  const script = `{ readlink /proc/self/fd/3 3>&1 >"${pipeFile}"; "$@" 2>&1; echo "exit $?"; } | { dd bs=1 count=1 2>/dev/null; sleep 1; cat; }`;
  const program = args[0]?.startsWith('/') ? args : ['git', ...args];
  const running = runProcess('sh', ['-c', script, 'sh', ...program], { cwd, env: aliceEnv() });
  let done = false;
  const nonBlocking = new Set<string>();
  const watched = (async () => {
    for (let pid = ''; !done; await new Promise((resolve) => setTimeout(resolve, 3))) {
      const pipe = fs.existsSync(pipeFile) ? fs.readFileSync(pipeFile, 'utf8').trim() : '';
      if (pipe === '') continue;
      pid = pid !== '' && writesTo(pid, pipe) ? pid : (writerOf(pipe) ?? '');
      const flags = pid === '' ? undefined : fdFlags(pid, 1);
      if (flags !== undefined && flags & 0o4000) nonBlocking.add(commandOf(pid));
    }
  })();
  const res = await running.finally(() => (done = true));
  await watched;
  assert.equal(res.code, 0, res.stderr);
  const all = res.stdout.split('\n').filter((l) => l !== '');
  const code = all.find((l) => l.startsWith('exit '))!;
  const lines = all
    .filter((l) => !l.startsWith('exit '))
    .map((l) => l.split(remote.replace(/\.git$/, '')).join('$REMOTE'));
  return { lines, code, nonBlocking: [...nonBlocking] };
}

/** What /proc says of a process that may have exited meanwhile (undefined then). */
function proc<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch (err) {
    if (['ENOENT', 'ESRCH', 'EACCES'].includes((err as NodeJS.ErrnoException).code ?? '')) return undefined;
    throw err;
  }
}
const writesTo = (pid: string, pipe: string) => proc(() => fs.readlinkSync(`/proc/${pid}/fd/1`)) === pipe;
const writerOf = (pipe: string) =>
  fs.readdirSync('/proc').find((pid) => /^\d+$/.test(pid) && writesTo(pid, pipe));
const fdFlags = (pid: string, fd: number) =>
  proc(() =>
    parseInt(/^flags:\s*([0-7]+)/m.exec(fs.readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8'))![1]!, 8),
  );
const commandOf = (pid: string) =>
  proc(() => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim()) ?? pid;

/**
 * Runs the helper as git does, sends `list`, and reads the flags of its fds 0-2 from
 * /proc/<pid>/fdinfo once it has answered (and warned) and waits for git's next line: Node puts the
 * flags back when it exits, so they are read while it runs. Under git its stderr is git's own
 * (`2>&1`: git's stdout too), so any change there is git's.
 */
async function flagsWhileListing(env: Record<string, string>): Promise<{ err: string; during: number[] }> {
  const helper = spawn(HELPER, ['origin', url], {
    env: { ...env, KNOTLESS_NODE: process.execPath },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const flags = (fd: number) => fdFlags(String(helper.pid), fd)!;
  let out = '';
  let err = '';
  helper.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  const answered = new Promise<void>((resolve) =>
    helper.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.endsWith('\n\n')) resolve();
    }),
  );
  const exited = new Promise((resolve) => helper.once('exit', resolve));
  helper.stdin.write('list\n');
  await answered;
  const during = [0, 1, 2].map(flags);
  helper.stdin.end();
  await exited;
  assert.equal(out.split('\n').filter((l) => l.includes(' refs/heads/')).length, REFS);
  return { err, during };
}

/**
 * Runs the helper as a parent that made its pipes non-blocking would (stdin, stdout and stderr
 * O_NONBLOCK, its stdout pipe shrunk to one page), sends `list`, and reads its answer through a reader
 * that takes one byte, then sleeps before reading on, so that the helper finds the pipe full. Returns
 * the answer's lines, its stderr, and the flags of its fds 0-2 read from /proc every few milliseconds.
 */
async function listInheritingNonBlocking(
  env: Record<string, string>,
): Promise<{ lines: string[]; err: string; samples: number[][] }> {
  const dir = t.tmpdir();
  const [pidFile, errFile] = [path.join(dir, 'pid'), path.join(dir, 'err')];
  // Perl here is only the parent's tool for fcntl (F_SETPIPE_SZ is 1031 on Linux).
  const parent = `use Fcntl; fcntl(STDOUT, 1031, 4096); for (\\*STDIN, \\*STDOUT, \\*STDERR) { fcntl($_, F_SETFL, fcntl($_, F_GETFL, 0) | O_NONBLOCK) or die } open(my $p, ">", shift) or die; print $p "$$\n"; close $p; exec @ARGV or die`;
  const script = `printf 'list\\n' | perl -e '${parent}' "$@" 2>"${errFile}" | { dd bs=1 count=1 2>/dev/null; sleep 1; cat; }`;
  const running = runProcess('sh', ['-c', script, 'sh', pidFile, HELPER, 'origin', url], {
    env: { ...env, KNOTLESS_NODE: process.execPath },
  });
  let done = false;
  const samples: number[][] = [];
  const watched = (async () => {
    for (; !done; await new Promise((resolve) => setTimeout(resolve, 3))) {
      const pid = fs.existsSync(pidFile) ? fs.readFileSync(pidFile, 'utf8').trim() : '';
      if (pid === '') continue;
      // A look counts only while fds 0-2 are the ones the parent gave (its two pipes and the error
      // file), before and after the flags are read: the launcher's shell points its fds 1 and 2 at
      // /dev/null for a moment (`command -v perl >/dev/null 2>&1`, a builtin), and those are not
      // the descriptions the helper was given.
      const given = () => {
        const [i, o, e] = [0, 1, 2].map((fd) => proc(() => fs.readlinkSync(`/proc/${pid}/fd/${fd}`)));
        return i?.startsWith('pipe:') === true && o?.startsWith('pipe:') === true && e === errFile;
      };
      if (!given()) continue;
      const flags = [0, 1, 2].map((fd) => fdFlags(pid, fd)).filter((f) => f !== undefined);
      if (flags.length === 3 && given()) samples.push(flags);
    }
  })();
  const res = await running.finally(() => (done = true));
  await watched;
  assert.equal(res.code, 0, res.stderr);
  return { lines: res.stdout.split('\n'), err: fs.readFileSync(errFile, 'utf8'), samples };
}

/** The helper's warnings, which a bare repository does not print. */
const warnings = (lines: string[]) => lines.filter((l) => l.startsWith('knotless: warning:'));
const ours = (lines: string[]) => lines.filter((l) => !l.startsWith('knotless: warning:'));

function sameAsBare(
  got: Awaited<ReturnType<typeof throughSlowReader>>,
  want: Awaited<ReturnType<typeof throughSlowReader>>,
): void {
  assert.equal(got.code, 'exit 0', got.lines.slice(-5).join('\n'));
  assert.deepEqual(got.nonBlocking, [], "git's pipe was made non-blocking while it ran");
  assert.ok(warnings(got.lines).length >= 1, 'the helper warned about the invalid record');
  const mine = ours(got.lines);
  const missing = want.lines.filter((l) => !mine.includes(l));
  assert.deepEqual(missing, [], `${missing.length} of git's ${want.lines.length} lines went missing`);
  assert.deepEqual(mine, want.lines);
}

const MODES = [
  { mode: 'without the agent', thin: {} },
  { mode: 'through the warm agent, to the thin helper in Perl', thin: {} },
  { mode: 'through the warm agent, to the thin helper in Node', thin: { KNOTLESS_THIN: 'node' } },
];
for (const { mode, thin } of MODES) {
  describe(`git's output through a shared, slow pipe, ${mode}`, () => {
    before(async () => {
      thinEnv = thin;
      await (prepared ??= prepare());
      if (mode === 'without the agent') return;
      const own = path.join(t.tmpdir(), 'agent.sock');
      agent = await spawnAgent(own, { ...alice.env, KNOTLESS_AGENT_SOCKET: own, KNOTLESS_AGENT_IDLE: '0' });
      relay = await countSessions(path.join(t.tmpdir(), 'relay.sock'), own);
    });
    after(async () => {
      thinEnv = {};
      await relay?.close();
      relay = undefined;
      await agent?.stop();
      agent = undefined;
    });

    /** Runs `run`; through the agent, checks that the agent took `helpers` helper sessions in it. */
    async function served<T>(helpers: number, run: () => Promise<T>): Promise<T> {
      const before = relay?.sessions() ?? 0;
      const got = await run();
      if (relay !== undefined)
        assert.equal(
          relay.sessions() - before,
          helpers,
          `helper sessions the agent took\n${agent?.log() ?? ''}`,
        );
      return got;
    }

    it(`ls-remote prints all ${REFS} refs`, async () => {
      const cwd = alice.dir();
      const got = await served(1, () => throughSlowReader(cwd, url, ['ls-remote', url]));
      const want = await throughSlowReader(cwd, `file://${bare}`, ['ls-remote', `file://${bare}`]);
      assert.equal(want.lines.length, REFS + 1, 'HEAD and every branch');
      sameAsBare(got, want);
    });

    // node:net reads process.stderr whenever it destroys a socket, so a fetch that closed a connection
    // made git's pipe non-blocking and git dropped the ref lines it printed after (bin/stdio.ts).
    it(`fetch reports all ${REFS} new branches`, async () => {
      const mine = alice.dir();
      await alice.ok(mine, 'init', '-q');
      const theirs = alice.dir();
      await alice.ok(theirs, 'init', '-q');
      const spec = 'refs/heads/*:refs/remotes/o/*';
      const got = await served(1, () => throughSlowReader(mine, url, ['fetch', url, spec]));
      const want = await throughSlowReader(theirs, `file://${bare}`, ['fetch', `file://${bare}`, spec]);
      assert.ok(want.lines.length > REFS, 'a line per branch');
      sameAsBare(got, want);
    });

    it('leaves its stdin, stdout and stderr as they were while it runs', async () => {
      const { err, during } = await served(1, () => flagsWhileListing(aliceEnv()));
      assert.ok(warnings(err.split('\n')).length >= 1, err);
      // Node starts a child with blocking stdio: any O_NONBLOCK there now is the helper's doing.
      for (const fd of [0, 1, 2])
        assert.equal(during[fd]! & 0o4000, 0, `the helper made its fd ${fd} non-blocking`);
    });

    it('leaves a stdin, stdout and stderr it was given non-blocking as they were, and writes all of its answer', async () => {
      const { lines, err, samples } = await served(1, () => listInheritingNonBlocking(aliceEnv()));
      assert.equal(lines.filter((l) => l.includes(' refs/heads/')).length, REFS, err);
      assert.ok(samples.length > 0, 'the helper was never seen running');
      // Every look at its descriptors while it ran found them still non-blocking: never cleared.
      const cleared = samples.filter((flags) => flags.some((f) => (f & 0o4000) === 0));
      assert.deepEqual(
        cleared,
        [],
        `the helper made its descriptors blocking in ${cleared.length} of ${samples.length} looks`,
      );
    });

    // Node's own warnings: the thin helper in Perl starts no Node.
    if (thin.KNOTLESS_THIN === 'node' || mode === 'without the agent')
      it("prints Node's own warnings without touching stderr either", async () => {
        const plant = path.join(alice.dir(), 'warn.cjs');
        fs.writeFileSync(
          plant,
          "setImmediate(() => process.emitWarning('planted', 'DeprecationWarning'));\n",
        );
        const env = { ...aliceEnv(), NODE_OPTIONS: `--require ${plant}` };
        const { err, during } = await served(1, () => flagsWhileListing(env));
        for (const fd of [0, 1, 2])
          assert.equal(during[fd]! & 0o4000, 0, `a warning made the helper's fd ${fd} non-blocking`);
        assert.match(err, /^knotless: warning: DeprecationWarning: planted$/m);
      });

    it('the CLI leaves the pipe it shares as it was', async () => {
      const got = await throughSlowReader(alice.dir(), url, [process.execPath, KNOTLESS_BIN, 'repo', 'list']);
      assert.equal(got.code, 'exit 0', got.lines.join('\n'));
      assert.ok(
        got.lines.some((l) => l.includes('pipes')),
        got.lines.join('\n'),
      );
      assert.deepEqual(got.nonBlocking, [], 'the pipe was made non-blocking while the CLI ran');
    });

    it('clone prints what a clone of the bare repository prints', async () => {
      const [a, b] = [alice.dir(), alice.dir()];
      const got = await served(1, () => throughSlowReader(a, url, ['clone', '--no-checkout', url, 'c']));
      const want = await throughSlowReader(b, `file://${bare}`, [
        'clone',
        '--no-checkout',
        `file://${bare}`,
        'c',
      ]);
      sameAsBare(got, want);
      const refs = (dir: string) =>
        alice.ok(path.join(dir, 'c'), 'for-each-ref', '--format=%(objectname) %(refname)');
      assert.equal(await refs(a), await refs(b));
    });
  });
}
