import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before } from 'node:test';
import { writeWrappers } from '../../../knotless-devnet/src/dev/env-file.ts';
import { knotless, runProcess, type Run } from './cli.ts';
import type { TestNet } from './network.ts';

/** A user with git and the helper on PATH, logged in to one account of the test network. */
export interface GitUser {
  env: Record<string, string>;
  /** Runs git in `cwd`; never throws, so tests can assert on failures. */
  git(cwd: string, ...args: string[]): Promise<Run>;
  /** Runs git and fails the test unless it succeeds; returns stdout. */
  ok(cwd: string, ...args: string[]): Promise<string>;
  /** Runs the knotless CLI as this user. */
  knotless(...args: string[]): Promise<Run>;
  /** A new empty working directory. */
  dir(): string;
  /**
   * Settles once the user is logged in: a test's own root `before` that runs this user's commands or
   * reads `env` awaits it first, since a file's root hooks run at once. The commands do not wait for
   * it themselves: each takes `extra`'s environment when it is called, which some tests switch
   * around a call.
   */
  ready: Promise<void>;
}

/**
 * Makes a git user for `handle`, logged in before the file's tests run. `extra` adds environment;
 * `login` replaces the app-password login (the OAuth tests sign in through the browser).
 */
export function useGitUser(
  t: TestNet,
  handle: string,
  extra: () => Record<string, string> = () => ({}),
  login?: (user: GitUser) => Promise<void>,
): GitUser {
  let loggedIn!: () => void;
  let loginFailed!: (err: unknown) => void;
  const ready = new Promise<void>((resolve, reject) => {
    loggedIn = resolve;
    loginFailed = reject;
  });
  // The hook below fails the file with the login's own error; whoever awaits `ready` is rejected too.
  ready.catch(() => undefined);
  const env = (): Record<string, string> => ({ ...user.env, ...extra() });
  const user: GitUser = {
    env: {},
    ready,
    git: (cwd, ...args) => runProcess('git', args, { env: env(), cwd }),
    async ok(cwd, ...args) {
      const res = await user.git(cwd, ...args);
      assert.equal(res.code, 0, `git ${args.join(' ')} failed:\n${res.stderr}`);
      return res.stdout;
    },
    knotless: (...args) => knotless(args, { env: env() }),
    dir: () => t.tmpdir(),
  };
  before(async () => {
    try {
      await logIn();
      loggedIn();
    } catch (err) {
      loginFailed(err);
      throw err;
    }
  });
  async function logIn(): Promise<void> {
    // Root-level hooks of one file do not wait for each other: wait for the network explicitly.
    await t.ready;
    const home = t.tmpdir();
    const bin = path.join(home, 'bin');
    writeWrappers(bin);
    user.env = t.env({
      PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`,
      HOME: home,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_AUTHOR_NAME: handle,
      GIT_AUTHOR_EMAIL: `${handle}@example.com`,
      GIT_COMMITTER_NAME: handle,
      GIT_COMMITTER_EMAIL: `${handle}@example.com`,
      GIT_CONFIG_COUNT: '2',
      GIT_CONFIG_KEY_0: 'init.defaultBranch',
      GIT_CONFIG_VALUE_0: 'main',
      GIT_CONFIG_KEY_1: 'advice.detachedHead',
      GIT_CONFIG_VALUE_1: 'false',
    });
    if (login !== undefined) return login(user);
    const res = await user.knotless('login', handle, '--app-password', t.password);
    assert.equal(res.code, 0, res.stderr);
  }
  return user;
}

/** Writes files (path → content) into a work tree and commits them; returns the new commit id. */
export async function commitFiles(
  user: GitUser,
  cwd: string,
  files: Record<string, string | Uint8Array>,
  message: string,
): Promise<string> {
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(cwd, name)), { recursive: true });
    fs.writeFileSync(path.join(cwd, name), content);
  }
  await user.ok(cwd, 'add', '-A');
  await user.ok(cwd, 'commit', '-q', '-m', message);
  return (await user.ok(cwd, 'rev-parse', 'HEAD')).trim();
}

/** A new repository in a fresh directory, with `origin` set to `url`. */
export async function newRepo(user: GitUser, url: string): Promise<string> {
  const dir = user.dir();
  await user.ok(dir, 'init', '-q');
  await user.ok(dir, 'remote', 'add', 'origin', url);
  return dir;
}

/** `git for-each-ref` as "oid ref" lines. */
export async function refsOf(user: GitUser, cwd: string, pattern = 'refs/'): Promise<string> {
  return user.ok(cwd, 'for-each-ref', '--format=%(objectname) %(refname)', pattern);
}

/** Returns a function that creates a fresh repository (`<prefix>-1`, `-2`, …) as `user` and gives its URL. */
export function repoMaker(user: GitUser, handle: string, prefix: string): () => Promise<string> {
  let n = 0;
  return async () => {
    const name = `${prefix}-${++n}`;
    const res = await user.knotless('repo', 'create', name);
    assert.equal(res.code, 0, res.stderr);
    return `knotless://${handle}/${name}`;
  };
}
