// The warm agent starts its git commands through a small spawner process (knotless-core
// git/spawner) instead of forking itself. Held here with real git: every way runGit uses a command
// (stdin whole or streamed, stdout in memory or to a file, stderr, exit codes, abort, the caller's
// directory) gives what starting git directly gives; a stranger on the socket starts nothing; a
// spawner killed mid-command fails that command and the next ones start directly; and the spawner
// and its directory go when the agent does.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { forCaller } from 'knotless-core/caller/scope';
import { useGitLauncher } from 'knotless-core/git/launch';
import { buildPack } from 'knotless-core/git/pack';
import { GitError, gitText, runGit } from 'knotless-core/git/run';
import { GitSpawner } from 'knotless-core/git/spawner/client';
import { SPAWNER_SCRIPT } from '../src/paths.ts';
import { alive } from './helpers/agent.ts';

const top = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-spawner-test-')));
const repo = path.join(top, 'repo.git');
after(() => fs.rmSync(top, { recursive: true, force: true }));

/** Runs `work` once with git started directly and once through `spawner`; both answers. */
async function both<T>(spawner: GitSpawner, work: () => Promise<T>): Promise<[T, T]> {
  useGitLauncher(undefined);
  const direct = await work();
  let launched = 0;
  useGitLauncher((args, opts) => {
    launched++;
    return spawner.launch(args, opts);
  });
  try {
    const through = await work();
    assert.ok(launched > 0, 'the spawner started the command');
    return [direct, through];
  } finally {
    useGitLauncher(undefined);
  }
}

/** What a promise settles to, as something assert can compare. */
async function outcome(p: Promise<unknown>): Promise<unknown> {
  try {
    return { ok: await p };
  } catch (err) {
    return err instanceof GitError ? { code: err.code, stderr: err.stderr } : { error: String(err) };
  }
}

describe('the git spawner', () => {
  let spawner: GitSpawner;
  let commit: string;

  before(async () => {
    spawnSync('git', ['init', '-q', '--bare', '--object-format=sha1', repo]);
    const env = { ...process.env, GIT_DIR: repo };
    const blob = spawnSync('git', ['hash-object', '-w', '--stdin'], { env, input: 'hello\n' })
      .stdout.toString()
      .trim();
    const tree = spawnSync('git', ['mktree'], { env, input: `100644 blob ${blob}\ta.txt\n` })
      .stdout.toString()
      .trim();
    commit = spawnSync('git', ['-c', 'user.name=a', '-c', 'user.email=a@b', 'commit-tree', tree, '-m', 'c'], {
      env,
    })
      .stdout.toString()
      .trim();
    spawner = await GitSpawner.start(SPAWNER_SCRIPT, process.execArgv);
  });
  after(() => spawner.stop());

  it('gives what git started directly gives', async () => {
    // stdin and stdout both, a batch answered as it is read.
    const batch = `${commit}\n${'0'.repeat(40)}\n${commit}^{tree}\n`;
    const [a, b] = await both(spawner, () =>
      gitText(['cat-file', '--batch-check'], { gitDir: repo, input: batch }),
    );
    assert.equal(b, a);
    assert.match(b, /missing/);
    // 8 MiB in and its name out: nothing of stdin is lost or read by the spawner.
    const big = crypto.randomBytes(8 << 20);
    const [h1, h2] = await both(spawner, () =>
      gitText(['hash-object', '-w', '--stdin'], { gitDir: repo, input: big }),
    );
    assert.equal(h2, h1);
    // Streamed stdin, a piece at a time.
    async function* pieces(): AsyncIterable<Uint8Array> {
      for (let i = 0; i < 64; i++) {
        await new Promise(setImmediate);
        yield big.subarray(i << 17, (i + 1) << 17);
      }
    }
    const [s1, s2] = await both(spawner, () =>
      gitText(['hash-object', '--stdin'], { gitDir: repo, input: pieces() }),
    );
    assert.equal(s2, h1);
    assert.equal(s1, h1);
    // Streamed from one buffer used again for every piece, as a pack file is read: each piece must
    // be on its way to git before the next overwrites it.
    async function* reused(): AsyncIterable<Uint8Array> {
      const buf = Buffer.alloc(1 << 17);
      for (let i = 0; i < 64; i++) {
        await new Promise(setImmediate);
        big.copy(buf, 0, i << 17, (i + 1) << 17);
        yield buf;
      }
    }
    const [r1, r2] = await both(spawner, () =>
      gitText(['hash-object', '--stdin'], { gitDir: repo, input: reused() }),
    );
    assert.equal(r1, h1);
    assert.equal(r2, h1);
    // Big stdout.
    const [o1, o2] = await both(spawner, () => runGit(['cat-file', 'blob', h1.trim()], { gitDir: repo }));
    assert.equal(o1.stdout.length, big.length);
    assert.ok(o2.stdout.equals(big));
    // stdout to a file (pack-objects' pack).
    const [p1, p2] = await both(spawner, () =>
      buildPack({
        tips: [commit],
        exclude: [],
        progress: false,
        tmpDir: path.join(top, 'tmp'),
        gitDir: repo,
      }),
    );
    assert.deepEqual(Buffer.from(p2.bytes()), Buffer.from(p1.bytes()));
    assert.deepEqual(fs.readdirSync(path.join(top, 'tmp')), [], 'no temporary file left');
  });

  it('gives the same failures, stderr and exit codes', async () => {
    const [a, b] = await both(spawner, () =>
      outcome(gitText(['cat-file', '-t', 'nonsense'], { gitDir: repo })),
    );
    assert.deepEqual(b, a);
    assert.equal((b as { code: number }).code, 128);
    const [c, d] = await both(spawner, () =>
      outcome(runGit(['merge-base', '--is-ancestor', commit, commit], { gitDir: repo, okCodes: [1] })),
    );
    assert.deepEqual(d, c);
    const [e, f] = await both(spawner, () => outcome(gitText(['no-such-command'], { gitDir: repo })));
    assert.deepEqual(f, e);
  });

  it("runs git in the caller's directory, its stderr to the caller", async () => {
    const seen: string[] = [];
    const caller = { env: { ...process.env, GIT_DIR: repo }, cwd: top, stderr: (t: string) => seen.push(t) };
    const [a, b] = await both(spawner, () =>
      forCaller(caller, () => gitText(['rev-parse', '--show-prefix'])),
    );
    assert.equal(b, a);
    const [, r] = await both(spawner, () =>
      forCaller(caller, () => outcome(runGit(['cat-file', '-t', 'x'], { passStderr: true }))),
    );
    assert.match(seen.join(''), /x/);
    assert.equal((r as { code: number }).code, 128);
  });

  it("loses none of git's output when git exits before the agent handles its start", async () => {
    // git given no input exits at once; the agent, busy, learns it started only later. A write on
    // the connection then (its stdin's end) failed, and Node dropped git's output still unread:
    // about one command in sixteen, eight at a time, gave an empty answer.
    const expected = await gitText(['cat-file', '-t', commit], { gitDir: repo });
    useGitLauncher((args, opts) => spawner.launch(args, opts));
    try {
      let wrong = 0;
      for (let round = 0; round < 40; round++) {
        const outs = await Promise.all(
          Array.from({ length: 8 }, () => gitText(['cat-file', '-t', commit], { gitDir: repo })),
        );
        wrong += outs.filter((o) => o !== expected).length;
      }
      assert.equal(wrong, 0);
    } finally {
      useGitLauncher(undefined);
    }
  });

  it('kills git when the work is aborted', async () => {
    useGitLauncher((args, opts) => spawner.launch(args, opts));
    try {
      const ac = new AbortController();
      // cat-file --batch waits for its stdin, which never ends.
      async function* forever(): AsyncIterable<Uint8Array> {
        yield Buffer.from(`${commit}\n`);
        await new Promise(() => {});
      }
      const running = runGit(['cat-file', '--batch'], { gitDir: repo, input: forever(), signal: ac.signal });
      setImmediate(() => ac.abort());
      await assert.rejects(running, { name: 'AbortError' });
    } finally {
      useGitLauncher(undefined);
    }
  });

  it('starts nothing for a connection without its token', async () => {
    const socket = spawner.socketPath;
    assert.ok(fs.existsSync(socket), socket);
    const marker = path.join(top, 'stranger-was-here');
    for (const line of [
      JSON.stringify({
        token: 'guess',
        id: 1,
        args: ['init', '-q', marker],
        env: process.env,
        stderr: 'pipe',
      }),
      'not json',
      JSON.stringify({ id: 2, args: ['init', '-q', marker], env: process.env, stderr: 'pipe' }),
    ]) {
      const conn = net.connect(socket);
      conn.write(`${line}\n`);
      await new Promise((resolve) => conn.on('close', resolve).on('error', resolve).resume());
    }
    assert.equal(fs.existsSync(marker), false);
    // And it still serves its agent.
    const [a, b] = await both(spawner, () => gitText(['rev-parse', commit], { gitDir: repo }));
    assert.equal(b, a);
  });
});

describe('a git spawner that goes away', () => {
  it('fails the command it was running; the next ones start directly', async () => {
    const spawner = await GitSpawner.start(SPAWNER_SCRIPT, process.execArgv);
    useGitLauncher((args, opts) => spawner.launch(args, opts));
    try {
      async function* forever(): AsyncIterable<Uint8Array> {
        yield Buffer.from('HEAD\n');
        await new Promise(() => {});
      }
      const running = runGit(['cat-file', '--batch'], { gitDir: repo, input: forever() });
      // Once git runs, the spawner is killed.
      await new Promise((r) => setTimeout(r, 200));
      process.kill(spawner.pid, 'SIGKILL');
      await assert.rejects(running, {
        name: 'KnotlessError',
        code: 'cancelled',
        message: /git spawner stopped/,
      });
      assert.equal((await gitText(['rev-parse', '--git-dir'], { gitDir: repo })).trim(), repo);
    } finally {
      useGitLauncher(undefined);
    }
  });

  it('starts git directly once its socket is gone, and stops', async () => {
    const spawner = await GitSpawner.start(SPAWNER_SCRIPT, process.execArgv);
    let launched = 0;
    useGitLauncher((args, opts) => {
      const child = spawner.launch(args, opts);
      if (child !== undefined) launched++;
      return child;
    });
    try {
      fs.rmSync(spawner.socketPath);
      assert.equal((await gitText(['rev-parse', '--git-dir'], { gitDir: repo })).trim(), repo);
      assert.equal(launched, 0);
      while (alive(spawner.pid)) await new Promise((r) => setTimeout(r, 20));
    } finally {
      useGitLauncher(undefined);
    }
  });

  it('starts a command its socket refuses directly, and the next ones', async () => {
    const spawner = await GitSpawner.start(SPAWNER_SCRIPT, process.execArgv);
    useGitLauncher((args, opts) => spawner.launch(args, opts));
    try {
      // Something else where the socket was: a connection is refused.
      fs.rmSync(spawner.socketPath);
      fs.writeFileSync(spawner.socketPath, '');
      let launched = 0;
      useGitLauncher((args, opts) => {
        const child = spawner.launch(args, opts);
        if (child !== undefined) launched++;
        return child;
      });
      // Its input streamed, as a pack from disk: started here, it still gets every piece.
      const data = crypto.randomBytes(1 << 20);
      async function* pieces(): AsyncIterable<Uint8Array> {
        for (let i = 0; i < 8; i++) {
          await new Promise(setImmediate);
          yield data.subarray(i << 17, (i + 1) << 17);
        }
      }
      const expected = spawnSync('git', ['hash-object', '--stdin'], { input: data }).stdout.toString();
      assert.equal(await gitText(['hash-object', '--stdin'], { gitDir: repo, input: pieces() }), expected);
      assert.equal(launched, 1, 'the spawner was tried once');
      assert.equal((await gitText(['rev-parse', '--git-dir'], { gitDir: repo })).trim(), repo);
      assert.equal(launched, 1, 'and not again');
      while (alive(spawner.pid)) await new Promise((r) => setTimeout(r, 20));
    } finally {
      useGitLauncher(undefined);
    }
  });

  it('leaves with its agent, directory and all', async () => {
    // An "agent" of its own: a Node process that starts a spawner and is then killed outright.
    const script = `
      const { GitSpawner } = await import(${JSON.stringify(import.meta.resolve('knotless-core/git/spawner/client'))});
      const s = await GitSpawner.start(${JSON.stringify(SPAWNER_SCRIPT)}, process.execArgv);
      process.stdout.write(JSON.stringify({ pid: s.pid, socket: s.socketPath }) + '\\n');
      setInterval(() => {}, 1000);
    `;
    const agent = spawn(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = await new Promise<string>((resolve) =>
      agent.stdout.once('data', (d: Buffer) => resolve(d.toString())),
    );
    const { pid, socket } = JSON.parse(line) as { pid: number; socket: string };
    assert.ok(fs.existsSync(socket));
    agent.kill('SIGKILL');
    await new Promise((r) => agent.on('exit', r));
    // The spawner notices its channel closing and leaves; waited for, not timed.
    while (alive(pid)) await new Promise((r) => setTimeout(r, 20));
    assert.equal(fs.existsSync(path.dirname(socket)), false);
  });
});
