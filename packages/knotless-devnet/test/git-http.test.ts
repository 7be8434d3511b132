import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
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
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env, encoding: 'utf8' });

describe('git http-backend on loopback', () => {
  it('accepts a push and serves a clone over smart HTTP', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-githttp-'));
    const root = path.join(dir, 'root');
    fs.mkdirSync(root);
    git(root, 'init', '-q', '--bare', '-b', 'main', 'r.git');
    const server = await startGitHttp(root);
    try {
      const work = path.join(dir, 'work');
      fs.mkdirSync(work);
      git(work, 'init', '-q', '-b', 'main');
      fs.writeFileSync(path.join(work, 'a.txt'), 'hello\n');
      git(work, 'add', '.');
      git(work, 'commit', '-q', '-m', 'one');
      git(work, 'push', '-q', `${server.url}/r.git`, 'main');
      git(dir, 'clone', '-q', `${server.url}/r.git`, 'clone');
      assert.equal(fs.readFileSync(path.join(dir, 'clone', 'a.txt'), 'utf8'), 'hello\n');
      assert.equal(git(path.join(dir, 'clone'), 'rev-parse', 'HEAD'), git(work, 'rev-parse', 'HEAD'));
    } finally {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
