// Readers under concurrency: a clone or fetch that is downloading blobs while a compaction
// frees them lists again and succeeds; shallow and partial clones start one helper each, and a
// partial clone's checkout one more for all the blobs it lacks, never one inside another (every
// git-remote-knotless start is counted through a wrapper on PATH).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { shellQuote } from '../../knotless-devnet/src/dev/env-file.ts';
import { KNOTLESS_BIN } from './helpers/cli.ts';
import { commitFiles, newRepo } from './helpers/git.ts';
import { lastLine, noise } from './faults/checks.ts';
import { useFaultEnv } from './faults/env.ts';
import { waitUntil } from './helpers/wait.ts';

const env = useFaultEnv();
const BLOB = 'com.atproto.sync.getBlob';

/** alice's environment through the proxy, with `more` on top (for processes run side by side). */
function aliceEnv(more: Record<string, string> = {}): Record<string, string> {
  return {
    ...env.alice.env,
    KNOTLESS_COMPACT: '0',
    KNOTLESS_LIST_WINDOW: '0',
    KNOTLESS_SERVICE: env.proxy.url,
    ...more,
  };
}

interface Run {
  code: number | null;
  stderr: string;
  ms: number;
}

/** Runs git in its own process group; past `limitMs` the whole group is killed (code null). */
function gitWithin(cwd: string, args: string[], vars: Record<string, string>, limitMs: number): Promise<Run> {
  return within('git', args, cwd, vars, limitMs);
}

function within(
  cmd: string,
  args: string[],
  cwd: string,
  vars: Record<string, string>,
  limitMs: number,
): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: vars, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), limitMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, ms: Date.now() - started });
    });
  });
}

/** Waits until the proxy has seen a request of `nsid` (polling what it logged, not sleeping blind). */
async function sawRequest(nsid: string, after: number): Promise<void> {
  await waitUntil(
    `a ${nsid} request at the proxy`,
    () => (env.proxy.requests.slice(after).some((r) => r.nsid === nsid) ? true : undefined),
    20,
  );
}

/** A repository whose main lists three packs in blobs, which `repo compact` merges into one. */
async function threeBlobPacks(): Promise<{ url: string; name: string; dir: string; tip: string }> {
  const { url, name } = await env.repo('readers');
  const dir = await newRepo(env.alice, url);
  let tip = '';
  for (let i = 0; i < 3; i++) {
    tip = await commitFiles(env.alice, dir, { [`big${i}.bin`]: noise(40_000, 10 + i) }, `big ${i}`);
    await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
  }
  return { url, name, dir, tip };
}

/**
 * Runs `read` (a clone or fetch with an empty cache) while every getBlob it sends is held at the
 * proxy; once the proxy has seen one, compacts the repository (straight to the PDS, so the
 * compaction is not held), which frees the blobs the reader listed; then lets the reader go on.
 */
async function readDuringCompaction(name: string, read: () => Promise<Run>): Promise<Run> {
  return readDuring(async () => {
    const compact = await env.withEnv({ KNOTLESS_SERVICE: env.t.net.pdsUrl }, () =>
      env.alice.knotless('repo', 'compact', name),
    );
    assert.equal(compact.code, 0, compact.stderr);
    // Split pushes compact into one pack of each kind: the structure and the blobs.
    assert.match(compact.stderr, /refs\/heads\/main: \d+ packs → 2/);
  }, read);
}

/** Runs `read` with its blob downloads held until `change` (sent straight to the PDS) is done. */
async function readDuring(change: () => Promise<void>, read: () => Promise<Run>): Promise<Run> {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  env.proxy.clearFaults();
  env.proxy.inject({ nsid: BLOB, times: Infinity, fault: { kind: 'hold', until: gate } });
  const seen = env.proxy.requests.length;
  const reading = read();
  try {
    await sawRequest(BLOB, seen);
    await change();
  } finally {
    release();
  }
  const res = await reading;
  env.proxy.clearFaults();
  // The race did happen: a held download came back without its blob.
  const gone = env.proxy.requests.slice(seen).filter((r) => r.nsid === BLOB && r.status >= 400);
  assert.ok(gone.length > 0, 'no blob download failed: the compaction did not land mid-read');
  return res;
}

async function fsckClean(dir: string): Promise<void> {
  const fsck = await env.alice.git(dir, 'fsck', '--full', '--strict');
  assert.equal(fsck.code, 0, fsck.stderr);
}

describe('readers survive compaction (F4)', () => {
  it('a clone whose blobs are freed by a compaction mid-download lists again and succeeds', async () => {
    const { url, name, tip } = await threeBlobPacks();
    const out = env.alice.dir();
    const vars = aliceEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') });
    const res = await readDuringCompaction(name, () =>
      gitWithin(out, ['clone', '-q', url, 'c'], vars, 120_000),
    );
    assert.equal(res.code, 0, res.stderr);
    assert.doesNotMatch(res.stderr, /missing|damaged/);
    assert.equal((await env.alice.ok(path.join(out, 'c'), 'rev-parse', 'HEAD')).trim(), tip);
    await fsckClean(path.join(out, 'c'));
  });

  it('a fetch whose blobs are freed by a compaction mid-download lists again and succeeds', async () => {
    const { url, name } = await env.repo('readers');
    const dir = await newRepo(env.alice, url);
    await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
    await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
    const out = env.alice.dir();
    await env.alice.ok(out, 'clone', '-q', url, 'c');
    let tip = '';
    for (let i = 0; i < 3; i++) {
      tip = await commitFiles(env.alice, dir, { [`big${i}.bin`]: noise(40_000, 20 + i) }, `big ${i}`);
      await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
    }
    // Packs 40 KB, 40 KB, 40 KB after a tiny one: compaction merges the three.
    const vars = aliceEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') });
    const clone = path.join(out, 'c');
    const res = await readDuringCompaction(name, () => gitWithin(clone, ['fetch', '-q'], vars, 120_000));
    assert.equal(res.code, 0, res.stderr);
    assert.equal((await env.alice.ok(clone, 'rev-parse', 'origin/main')).trim(), tip);
    await fsckClean(clone);
  });

  it('`repo commit` whose blobs are freed by a compaction mid-download lists again and commits', async () => {
    const { url, name, tip } = await threeBlobPacks();
    const out = env.alice.dir();
    const file = path.join(out, 'note.txt');
    fs.writeFileSync(file, 'from a bot\n');
    const vars = aliceEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') });
    const args = [KNOTLESS_BIN, 'repo', 'commit', name, '-m', 'bot', '--add', `note.txt=${file}`];
    const res = await readDuringCompaction(name, () => within(process.execPath, args, out, vars, 120_000));
    assert.equal(res.code, 0, res.stderr);
    await env.alice.ok(out, 'clone', '-q', url, 'c');
    assert.equal((await env.alice.ok(path.join(out, 'c'), 'rev-parse', 'HEAD^')).trim(), tip);
    await fsckClean(path.join(out, 'c'));
  });

  it('a compaction whose blobs are freed by another compaction reads the ref again', async () => {
    const { name } = await threeBlobPacks();
    const out = env.alice.dir();
    const vars = aliceEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') });
    const args = [KNOTLESS_BIN, 'repo', 'compact', name];
    const res = await readDuringCompaction(name, () => within(process.execPath, args, out, vars, 120_000));
    assert.equal(res.code, 0, res.stderr);
    // The other one did the work: this one finds the list in shape and writes nothing.
    assert.match(res.stderr, /Nothing to compact/);
  });

  it('a clone whose wanted ref is deleted mid-download says the remote changed, not damaged', async () => {
    const { url } = await env.repo('readers');
    const dir = await newRepo(env.alice, url);
    await commitFiles(env.alice, dir, { 'a.txt': 'one\n' }, 'one');
    await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
    await env.alice.ok(dir, 'checkout', '-q', '-b', 'side');
    await commitFiles(env.alice, dir, { 'big.bin': noise(40_000, 31) }, 'big');
    await env.alice.ok(dir, 'push', '-q', 'origin', 'side');
    const out = env.alice.dir();
    const vars = aliceEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') });
    const res = await readDuring(
      async () => {
        const direct = { KNOTLESS_SERVICE: env.t.net.pdsUrl };
        await env.withEnv(direct, () => env.alice.ok(dir, 'push', '-q', 'origin', ':side'));
      },
      () => gitWithin(out, ['clone', '-q', url, 'c'], vars, 120_000),
    );
    assert.notEqual(res.code, 0);
    const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
    assert.deepEqual(ours, [
      `knotless: alice.test/${url.split('/').pop()!} changed while fetching (a push or compaction replaced its packs); fetch again.`,
    ]);
  });

  it('a clone whose ref is force-pushed away mid-download says the remote changed, not damaged', async () => {
    const { url } = await env.repo('readers');
    const dir = await newRepo(env.alice, url);
    await commitFiles(env.alice, dir, { 'big.bin': noise(40_000, 41) }, 'big');
    await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
    // Another repository, without main's objects: its forced push lists none of main's packs.
    const other = await newRepo(env.alice, url);
    await commitFiles(env.alice, other, { 'else.bin': noise(40_000, 42) }, 'unrelated');
    const out = env.alice.dir();
    const vars = aliceEnv({ KNOTLESS_CACHE_DIR: path.join(out, 'cache') });
    const res = await readDuring(
      async () => {
        const direct = { KNOTLESS_SERVICE: env.t.net.pdsUrl };
        await env.withEnv(direct, () => env.alice.ok(other, 'push', '-q', '--force', 'origin', 'main'));
      },
      () => gitWithin(out, ['clone', '-q', url, 'c'], vars, 120_000),
    );
    assert.notEqual(res.code, 0);
    const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
    assert.deepEqual(ours, [
      `knotless: alice.test/${url.split('/').pop()!} changed while fetching (a push or compaction replaced its packs); fetch again.`,
    ]);
  });
});

/** A PATH whose git-remote-knotless counts its starts in `log` (and stops a runaway at 20). */
function countingPath(log: string): string {
  const bin = path.join(env.alice.dir(), 'counting-bin');
  fs.mkdirSync(bin, { recursive: true });
  const real = path.join(env.alice.env['PATH']!.split(':')[0]!, 'git-remote-knotless');
  fs.writeFileSync(
    path.join(bin, 'git-remote-knotless'),
    [
      '#!/bin/sh',
      `echo "$$" >> ${shellQuote(log)}`,
      `[ "$(wc -l < ${shellQuote(log)})" -gt 20 ] && { echo "runaway helper" >&2; exit 1; }`,
      `exec ${shellQuote(real)} "$@"`,
      '',
    ].join('\n'),
    { mode: 0o755 },
  );
  return `${bin}:${env.alice.env['PATH']!}`;
}

function starts(log: string): number {
  return fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).length : 0;
}

describe('shallow and partial clones: one helper each, and one batched lazy fetch (no recursion)', () => {
  const cases: [string, string[], number][] = [
    // The clone's helper, then the checkout's one fetch of every blob the tip's tree lacks.
    ['--filter=blob:none', ['--filter=blob:none'], 2],
    ['--depth 1', ['--depth', '1'], 1],
  ];
  for (const [label, flags, helpers] of cases) {
    it(`git clone ${label} works and starts ${helpers} helper${helpers > 1 ? 's' : ''}`, async () => {
      const { url } = await threeBlobPacks();
      const out = env.alice.dir();
      const log = path.join(out, 'helpers.log');
      const vars = aliceEnv({ PATH: countingPath(log) });
      // Killed after 120 s, a hang guard: that it does not loop is told by the helpers it started.
      const res = await gitWithin(out, ['clone', ...flags, url, 'c'], vars, 120_000);
      assert.notEqual(res.code, null, `still running after 120 s; ${starts(log)} helpers started`);
      assert.equal(res.code, 0, res.stderr);
      assert.equal(starts(log), helpers, `${starts(log)} helpers started`);
      assert.deepEqual(
        res.stderr.split('\n').filter((l) => l.startsWith('knotless: ')),
        [],
        res.stderr,
      );
      const fsck = await gitWithin(path.join(out, 'c'), ['fsck', '--no-progress'], vars, 120_000);
      assert.equal(fsck.code, 0, fsck.stderr);
    });
  }

  it('git clone --depth 1 on protocol version 0 stops with one sentence and leaves no clone', async () => {
    const { url } = await threeBlobPacks();
    const out = env.alice.dir();
    const log = path.join(out, 'helpers.log');
    const vars = aliceEnv({ PATH: countingPath(log) });
    const args = ['-c', 'protocol.version=0', 'clone', '--depth', '1', url, 'c'];
    const res = await gitWithin(out, args, vars, 120_000);
    assert.notEqual(res.code, null, `still running after 120 s; ${starts(log)} helpers started`);
    assert.notEqual(res.code, 0, 'the clone succeeded');
    const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
    assert.equal(ours.length, 1, res.stderr);
    assert.match(
      ours[0]!,
      /needs git's protocol version 2, and this git is set to an older one; run the command with `-c protocol\.version=2`\.$/,
    );
    assert.equal(fs.existsSync(path.join(out, 'c')), false, 'git left a half-made clone');
  });

  it('a fetch into a repository with a promisor remote never starts the helper inside itself', async () => {
    const { url, dir } = await threeBlobPacks();
    const out = env.alice.dir();
    await env.alice.ok(out, 'clone', '-q', url, 'c');
    const clone = path.join(out, 'c');
    // What `git clone --filter` would configure: objects the repository lacks are fetched lazily
    // from origin, so the helper's own `git cat-file` on a wanted object starts a fetch of origin.
    await env.alice.ok(clone, 'config', 'remote.origin.promisor', 'true');
    await env.alice.ok(clone, 'config', 'extensions.partialClone', 'origin');
    await env.alice.ok(clone, 'config', 'core.repositoryformatversion', '1');
    const next = await commitFiles(env.alice, dir, { 'more.bin': noise(40_000, 77) }, 'more');
    await env.alice.ok(dir, 'push', '-q', 'origin', 'main');
    const log = path.join(out, 'helpers.log');
    const res = await gitWithin(clone, ['fetch', '-q'], aliceEnv({ PATH: countingPath(log) }), 60_000);
    assert.notEqual(res.code, null, `still running after 60 s; ${starts(log)} helpers started`);
    // The outer helper, and at most one refused nested start per lazy fetch git tried.
    assert.ok(starts(log) <= 3, `${starts(log)} helpers started:\n${lastLine(res.stderr)}`);
    assert.equal(res.code, 0, res.stderr);
    assert.equal((await env.alice.ok(clone, 'rev-parse', 'origin/main')).trim(), next);
  });
});
