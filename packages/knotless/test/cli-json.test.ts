// `--json` on every command that has it, found from the command table: one JSON value on stdout and
// nothing else there (messages go to stderr), and on failure nothing on stdout at all. A command
// given --json later must be added to RUNS below, or the first test fails.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { COMMANDS } from '../src/cli/table.ts';
import { KNOTLESS_BIN, runProcess, type Run } from './helpers/cli.ts';
import { useGitUser, type GitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

const t = useNetwork(['alice.test', 'bob.test']);
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_AGENT: '0' }));
const bob = useGitUser(t, 'bob.test', () => ({ KNOTLESS_AGENT: '0' }));

/** What the runs share: the repository, the pull request and issue ids, a clone. */
interface Made {
  repo: string;
  pr: string;
  issue: string;
  clone: string;
  /** main's commit. */
  commit: string;
}

/** Each command with --json, in the order they run (writes after the reads of the same thing). */
const RUNS: Array<[string, GitUser, (m: Made) => string[]]> = [
  ['whoami', alice, () => []],
  ['repo list', alice, () => []],
  ['repo info', alice, (m) => [m.repo]],
  ['verify', alice, (m) => [m.repo]],
  ['repo default-branch', alice, (m) => [m.repo]],
  ['repo protect', alice, (m) => [m.repo, 'release', '--require-check', 'test']],
  ['repo maintainer', alice, (m) => ['list', m.repo]],
  ['check set', alice, (m) => [`alice.test/${m.repo}`, m.commit, '--context', 'test', '--state', 'success']],
  ['check list', alice, (m) => [`alice.test/${m.repo}`, 'main']],
  ['pr list', alice, (m) => [`alice.test/${m.repo}`]],
  ['pr view', alice, (m) => [`alice.test/${m.repo}`, m.pr]],
  ['pr comment', alice, (m) => [`alice.test/${m.repo}`, m.pr, '--body', 'looks good']],
  ['pr label', alice, (m) => [`alice.test/${m.repo}`, m.pr, '--add', 'ready']],
  ['pr update', alice, (m) => [`alice.test/${m.repo}`, m.pr]],
  ['pr close', alice, (m) => [`alice.test/${m.repo}`, m.pr]],
  ['pr reopen', alice, (m) => [`alice.test/${m.repo}`, m.pr]],
  ['pr checkout', alice, (m) => [`alice.test/${m.repo}`, m.pr]],
  ['pr merge', alice, (m) => [`alice.test/${m.repo}`, m.pr]],
  ['issue list', alice, (m) => [`alice.test/${m.repo}`]],
  ['issue view', alice, (m) => [`alice.test/${m.repo}`, m.issue]],
  ['issue comment', alice, (m) => [`alice.test/${m.repo}`, m.issue, '--body', 'yes']],
  ['issue label', alice, (m) => [`alice.test/${m.repo}`, m.issue, '--add', 'bug']],
  ['issue close', alice, (m) => [`alice.test/${m.repo}`, m.issue]],
  ['issue reopen', alice, (m) => [`alice.test/${m.repo}`, m.issue]],
  ['repo fork', bob, (m) => [`alice.test/${m.repo}`]],
  ['repo migrate', alice, (m) => [m.repo]],
  ['key list', alice, () => []],
  ['cache', alice, () => []],
  ['agent status', alice, () => []],
  ['cache clear', alice, () => []],
];
/** Those made before the runs, checked the same way. */
const MADE_BY_SETUP = ['pr create', 'issue create'];
/** Those that need an appview: webhook-cli.test.ts checks their --json against a real one. */
const AT_APPVIEW = ['webhook add', 'webhook list', 'webhook test'];

async function cli(user: GitUser, args: string[], cwd?: string): Promise<Run> {
  return runProcess(process.execPath, [KNOTLESS_BIN, ...args], {
    env: { ...user.env, KNOTLESS_AGENT: '0' },
    ...(cwd === undefined ? {} : { cwd }),
  });
}

/** The value a --json run printed: all of stdout is one JSON value and its newline. */
function jsonOf(res: Run, what: string): unknown {
  assert.equal(res.code, 0, `${what}: ${res.stderr}`);
  assert.ok(res.stdout.endsWith('}\n') || res.stdout.endsWith(']\n'), `${what}: ${res.stdout}`);
  assert.equal(res.stdout.trimEnd().split('\n').length, 1, `${what}: one line`);
  // Messages stay on stderr, and none of them is the JSON again.
  assert.doesNotMatch(res.stderr, /^[[{]/m, what);
  return JSON.parse(res.stdout) as unknown;
}

describe('--json', () => {
  it('covers every command that has it', async () => {
    const withJson: string[] = [];
    for (const [name, load] of Object.entries(COMMANDS))
      if ((await load()).command.options?.['json'] !== undefined) withJson.push(name);
    const covered = [...RUNS.map(([n]) => n), ...MADE_BY_SETUP, ...AT_APPVIEW];
    // Each way round by name, so that the failure says which command to add where.
    for (const name of withJson)
      assert.ok(covered.includes(name), `knotless ${name} has --json: give it a run in RUNS above`);
    for (const name of covered)
      assert.ok(withJson.includes(name), `knotless ${name} is listed here but has no --json in the table`);
  });

  it('prints one JSON value alone on stdout, for every command that has it', async () => {
    await t.ready;
    const repo = `json-${Date.now()}`;
    assert.equal((await cli(alice, ['repo', 'create', repo, '--description', 'a "quoted" one'])).code, 0);
    const file = path.join(alice.dir(), 'f.txt');
    fs.writeFileSync(file, 'one\n');
    for (const branch of ['main', 'feature']) {
      const res = await cli(alice, [
        'repo',
        'commit',
        repo,
        '-m',
        branch,
        '--branch',
        branch,
        '--add',
        `${branch}.txt=${file}`,
      ]);
      assert.equal(res.code, 0, res.stderr);
    }
    const spec = `alice.test/${repo}`;
    const pr = jsonOf(
      await cli(alice, ['pr', 'create', spec, '--head', `${repo}:feature`, '--title', 'T', '--json']),
      'pr create',
    ) as { id: string };
    const issue = jsonOf(
      await cli(alice, ['issue', 'create', spec, '--title', 'I', '--json']),
      'issue create',
    ) as { id: string };
    const clone = path.join(alice.dir(), 'c');
    assert.equal((await alice.git(path.dirname(clone), 'clone', '-q', `knotless://${spec}`, clone)).code, 0);
    const commit = (await alice.git(clone, 'rev-parse', 'origin/main')).stdout.trim();
    const made: Made = { repo, pr: pr.id, issue: issue.id, clone, commit };
    for (const [name, user, args] of RUNS) {
      const res = await cli(
        user,
        [...name.split(' '), ...args(made), '--json'],
        name === 'pr checkout' ? clone : undefined,
      );
      const value = jsonOf(res, name);
      if (name.startsWith('pr ') || name.startsWith('issue ')) {
        const one = (Array.isArray(value) ? value[0] : value) as Record<string, unknown>;
        for (const key of ['id', 'state', 'title', 'author']) assert.ok(key in one, `${name}: ${key}`);
      }
    }
    // A failure prints nothing on stdout, --json or not: there is no value to print.
    const missing = await cli(alice, ['repo', 'info', 'nope', '--json']);
    assert.equal(missing.code, 7);
    assert.equal(missing.stdout, '');
    assert.match(missing.stderr, /^knotless: .+\.\n$/);
  });
});
