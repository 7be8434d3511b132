import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { startGitHttp } from '../src/git-http.ts';

const env = {
  PATH: process.env['PATH'] ?? '/usr/bin:/bin',
  HOME: os.tmpdir(),
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.com',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.com',
};
// Asynchronous on purpose: the server answering git runs in this very process.
const run = promisify(execFile);
const git = async (cwd: string, ...args: string[]) =>
  (await run('git', args, { cwd, env, encoding: 'utf8' })).stdout;

describe('git http-backend on loopback', () => {
  it('accepts a push and serves a clone over smart HTTP', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-githttp-'));
    const root = path.join(dir, 'root');
    fs.mkdirSync(root);
    await git(root, 'init', '-q', '--bare', '-b', 'main', 'r.git');
    const server = await startGitHttp(root);
    try {
      const work = path.join(dir, 'work');
      fs.mkdirSync(work);
      await git(work, 'init', '-q', '-b', 'main');
      fs.writeFileSync(path.join(work, 'a.txt'), 'hello\n');
      await git(work, 'add', '.');
      await git(work, 'commit', '-q', '-m', 'one');
      await git(work, 'push', '-q', `${server.url}/r.git`, 'main');
      await git(dir, 'clone', '-q', `${server.url}/r.git`, 'clone');
      assert.equal(fs.readFileSync(path.join(dir, 'clone', 'a.txt'), 'utf8'), 'hello\n');
      assert.equal(
        await git(path.join(dir, 'clone'), 'rev-parse', 'HEAD'),
        await git(work, 'rev-parse', 'HEAD'),
      );
    } finally {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
