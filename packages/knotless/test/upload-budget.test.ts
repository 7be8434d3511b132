import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { agentView, spawnAgent, type RunningAgent } from './helpers/agent.ts';
import { KNOTLESS_BIN, runProcess } from './helpers/cli.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';

// Before a push or an LFS upload sends more blob uploads than the PDS says are left (the
// `RateLimit-*` headers an answer of this command carried), one line on stderr says what it needs,
// what is left and until when; then it goes on. The PDS stand-in is the real PDS behind the devnet's
// proxy, which adds the headers the reference PDS sends (or lies in them) to every answer. A tiny
// blob limit makes a few kilobytes need a dozen uploads.
const BLOB_LIMIT = 4096;
const t = useNetwork(['alice.test'], { blobUploadLimit: BLOB_LIMIT });
let proxy: Proxy | undefined;
let agent: RunningAgent | undefined;
let socket = '';
const alice = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_COMPACT: '0',
  ...(socket === '' ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: socket }),
  ...(proxy === undefined ? {} : { KNOTLESS_SERVICE: proxy.url }),
}));
const createRepo = repoMaker(alice, 'alice.test', 'budget');
const UPLOAD = 'com.atproto.repo.uploadBlob';

before(async () => {
  await t.ready;
  proxy = await startProxy({
    target: t.net.pdsUrl,
    watchPids: () => (agent ? [agent.child.pid!] : []),
  });
});
after(() => proxy?.close());
afterEach(async () => {
  proxy?.clearFaults();
  socket = '';
  await agent?.stop();
  agent = undefined;
});

/** Every answer from now on states this budget: `limit` a day, `remaining` left, reset in `resetIn` s. */
function stateBudget(remaining: string, resetIn = 3300, extra: Record<string, string> = {}): number {
  const reset = Math.floor(Date.now() / 1000) + resetIn;
  proxy!.inject({
    times: Infinity,
    fault: {
      kind: 'headers',
      headers: {
        'ratelimit-limit': '1000',
        'ratelimit-remaining': remaining,
        'ratelimit-reset': String(reset),
        'ratelimit-policy': '1000;w=86400',
        ...extra,
      },
    },
  });
  return reset;
}

/** How the line writes a reset given in epoch seconds. */
const readable = (reset: number) => new Date(reset * 1000).toISOString().slice(0, 19).replace('T', ' ');

const BUDGET_LINE = /PDS says are left/;
const TAIL =
  'going on: if the PDS refuses, it waits (within KNOTLESS_RATE_LIMIT_WAIT) or stops saying when to retry.';

function budgetLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => BUDGET_LINE.test(l));
}

/** stderr holds no stack or internal error. */
function noStack(stderr: string): void {
  assert.doesNotMatch(stderr, /internal error|^\s+at |RangeError|Invalid time/m, stderr);
}

/** Starts an agent the user's commands go through from now on. */
async function startAgent(): Promise<RunningAgent> {
  socket = path.join(t.tmpdir(), 'agent.sock');
  agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_AGENT_IDLE: '0', KNOTLESS_SERVICE: proxy!.url });
  return agent;
}

/** Waits (bounded, 60 s: a guard, not a speed claim) until the agent answers from a current view. */
async function viewReady(q: { did: string; repo: string; pds: string }): Promise<boolean> {
  for (let i = 0; i < 300; i++) {
    if ((await agentView(socket, q)) !== null) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

/**
 * A repository with main pushed (a small commit, or with `seed` one that uploads a blob too), and a
 * commit on top of about `blobs` blobs' worth of random bytes.
 */
async function ahead(blobs: number, seed = false): Promise<{ url: string; dir: string }> {
  const url = await createRepo();
  const dir = await newRepo(alice, url);
  await commitFiles(
    alice,
    dir,
    { 'a.txt': '1\n', ...(seed ? { 'seed.bin': crypto.randomBytes(20_000) } : {}) },
    'one',
  );
  await alice.ok(dir, 'push', '-q', 'origin', 'main');
  await commitFiles(alice, dir, { 'big.bin': crypto.randomBytes(blobs * BLOB_LIMIT + 1) }, 'big');
  return { url, dir };
}

/** The one budget line of a push, checked whole; answers the uploads it says are needed. */
function pushLine(stderr: string, remaining: number, reset: number): number {
  const lines = budgetLines(stderr);
  assert.equal(lines.length, 1, stderr);
  const m = new RegExp(
    `^knotless: uploading (\\d+) bytes of packs needs (\\d+) blob uploads, more than the ${remaining} the PDS says are left \\(of 1000 per day\\) until ${readable(reset)} UTC \\(in \\d+ min\\); ${TAIL.replace(/[()]/g, '\\$&')}$`,
  ).exec(lines[0]!);
  assert.ok(m !== null, lines[0]);
  // Parts of at most the limit, and no fewer.
  assert.equal(Number(m[2]), Math.ceil(Number(m[1]) / BLOB_LIMIT), lines[0]);
  return Number(m[2]);
}

describe('a push that needs more blob uploads than the PDS says are left', () => {
  it('says so once before uploading, with the numbers, and goes on (helper direct)', async () => {
    const { dir } = await ahead(10);
    proxy!.reset();
    const reset = stateBudget('3');
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    noStack(res.stderr);
    const needed = pushLine(res.stderr, 3, reset);
    // Said before the first upload: the reads before it carried the figure. It counted them all.
    assert.equal(proxy!.count(UPLOAD), needed);
    assert.ok(needed > 10, String(needed));
  });

  it('says nothing when enough is left, nor when the PDS states nothing', async () => {
    const { dir } = await ahead(10);
    stateBudget('1000');
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    assert.deepEqual(budgetLines(res.stderr), []);
    proxy!.clearFaults();
    await commitFiles(alice, dir, { 'more.bin': crypto.randomBytes(10 * BLOB_LIMIT) }, 'more');
    const quiet = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(quiet.code, 0, quiet.stderr);
    assert.deepEqual(budgetLines(quiet.stderr), []);
  });

  it('believes no header that lies: nothing is said wrong and every push lands', async () => {
    const { url, dir } = await ahead(10);
    const lies: Array<[string, Record<string, string>]> = [
      ['-5', {}],
      ['lots', {}],
      ['99999999999999999999', {}],
      ['2', { 'ratelimit-reset': '99999999999999' }],
      ['2', { 'ratelimit-reset': '-1' }],
      ['2', { 'ratelimit-reset': 'tomorrow' }],
      ['5000', {}],
      ['2', { 'ratelimit-policy': 'unlimited' }],
    ];
    for (const [i, [remaining, extra]] of lies.entries()) {
      if (i > 0)
        await commitFiles(alice, dir, { [`more${i}.bin`]: crypto.randomBytes(10 * BLOB_LIMIT) }, `more ${i}`);
      proxy!.clearFaults();
      stateBudget(remaining, 3300, extra);
      const res = await alice.git(dir, 'push', 'origin', 'main');
      assert.equal(res.code, 0, `${remaining} ${JSON.stringify(extra)}: ${res.stderr}`);
      noStack(res.stderr);
      assert.deepEqual(budgetLines(res.stderr), [], `${remaining} ${JSON.stringify(extra)}`);
    }
    proxy!.clearFaults();
    const head = (await alice.ok(dir, 'rev-parse', 'HEAD')).trim();
    assert.equal((await alice.ok(alice.dir(), 'ls-remote', url, 'refs/heads/main')).split('\t')[0], head);
  });

  it('says so once through the warm agent, which carried the requests and passed the figure on', async () => {
    const running = await startAgent();
    // The first push uploads too: the PDS's blob limit is then known (cached), not read again.
    const { url, dir } = await ahead(10, true);
    const q = { did: t.dids['alice.test']!, repo: url.split('/').pop()!, pds: t.net.pdsUrl };
    assert.ok(await viewReady(q), 'the agent never had a view');
    // Another command's reads, carried by the agent, state the budget; the push then reads nothing
    // before its uploads (its listing is the agent's view), so only the agent can tell it.
    const reset = stateBudget('4');
    await alice.ok(dir, 'ls-remote', 'origin');
    proxy!.reset();
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    noStack(res.stderr);
    const needed = pushLine(res.stderr, 4, reset);
    const first = proxy!.requests.findIndex((r) => r.nsid === UPLOAD);
    assert.deepEqual(
      proxy!.requests.slice(0, first).map((r) => r.nsid),
      [],
      'the push read nothing before its first upload',
    );
    const uploads = proxy!.requests.filter((r) => r.nsid === UPLOAD);
    assert.equal(uploads.length, needed);
    assert.ok(
      uploads.every((r) => r.pid === running.child.pid),
      JSON.stringify(uploads.map((r) => r.pid)),
    );
  });
});

describe('an LFS upload that needs more blob uploads than the PDS says are left', () => {
  /** A repository set up for LFS with two objects committed (10 and 12 blobs' worth), not pushed. */
  async function lfsRepo(): Promise<{ dir: string; sizes: Map<string, number> }> {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await alice.ok(dir, 'lfs', 'install');
    const installed = await runProcess(process.execPath, [KNOTLESS_BIN, 'lfs', 'install'], {
      env: { ...alice.env, KNOTLESS_AGENT: '0' },
      cwd: dir,
    });
    assert.equal(installed.code, 0, installed.stderr);
    await alice.ok(dir, 'lfs', 'track', '*.bin');
    await commitFiles(
      alice,
      dir,
      {
        'one.bin': crypto.randomBytes(10 * BLOB_LIMIT + 1),
        'two.bin': crypto.randomBytes(12 * BLOB_LIMIT + 1),
      },
      'lfs',
    );
    const sizes = new Map<string, number>();
    for (const name of ['one.bin', 'two.bin']) {
      const oid = /^oid sha256:([0-9a-f]{64})$/m.exec(await alice.ok(dir, 'show', `HEAD:${name}`))?.[1];
      assert.ok(oid !== undefined);
      sizes.set(oid, name === 'one.bin' ? 10 * BLOB_LIMIT + 1 : 12 * BLOB_LIMIT + 1);
    }
    return { dir, sizes };
  }

  /** `git lfs push`, its stderr in its stdout through a pipe (see lfs-budget.test.ts for why). */
  async function lfsPush(dir: string) {
    const env = {
      ...alice.env,
      ...(socket === '' ? { KNOTLESS_AGENT: '0' } : { KNOTLESS_AGENT_SOCKET: socket }),
    };
    return runProcess('bash', ['-c', 'set -o pipefail; git lfs push origin main 2>&1 | cat'], {
      env: { ...env, KNOTLESS_SERVICE: proxy!.url, KNOTLESS_COMPACT: '0' },
      cwd: dir,
    });
  }

  /** The one budget line of an LFS push, checked whole: one of the objects, with all its blobs. */
  function lfsLine(out: string, sizes: Map<string, number>, remaining: number, reset: number): void {
    const lines = budgetLines(out);
    assert.equal(lines.length, 1, out);
    const m = new RegExp(
      `^knotless: uploading LFS object ([0-9a-f]{12}) needs (\\d+) blob uploads, more than the ${remaining} the PDS says are left \\(of 1000 per day\\) until ${readable(reset)} UTC \\(in \\d+ min\\); ${TAIL.replace(/[()]/g, '\\$&')}$`,
    ).exec(lines[0]!);
    assert.ok(m !== null, lines[0]);
    const oid = [...sizes.keys()].find((o) => o.startsWith(m[1]!));
    assert.ok(oid !== undefined, lines[0]);
    assert.equal(Number(m[2]), Math.ceil(sizes.get(oid)! / BLOB_LIMIT), lines[0]);
  }

  it('says so once for the transfer, with the numbers, and every object lands (direct)', async () => {
    const { dir, sizes } = await lfsRepo();
    proxy!.reset();
    const reset = stateBudget('3');
    const push = await lfsPush(dir);
    assert.equal(push.code, 0, push.stdout);
    noStack(push.stdout);
    lfsLine(push.stdout, sizes, 3, reset);
    assert.equal(proxy!.count(UPLOAD), 11 + 13);
    // Enough left: nothing (the objects are stored, so a second push sends nothing either way).
    const fresh = await lfsRepo();
    proxy!.clearFaults();
    stateBudget('1000');
    const quiet = await lfsPush(fresh.dir);
    assert.equal(quiet.code, 0, quiet.stdout);
    assert.deepEqual(budgetLines(quiet.stdout), []);
  });

  it('believes no header that lies', async () => {
    const { dir } = await lfsRepo();
    stateBudget('2', 3300, { 'ratelimit-reset': '99999999999999', 'ratelimit-limit': 'x' });
    const push = await lfsPush(dir);
    assert.equal(push.code, 0, push.stdout);
    noStack(push.stdout);
    assert.deepEqual(budgetLines(push.stdout), []);
  });

  it('says so once through the warm agent, which carried the uploads', async () => {
    const running = await startAgent();
    const { dir, sizes } = await lfsRepo();
    proxy!.reset();
    const reset = stateBudget('5');
    const push = await lfsPush(dir);
    assert.equal(push.code, 0, push.stdout);
    noStack(push.stdout);
    lfsLine(push.stdout, sizes, 5, reset);
    const uploads = proxy!.requests.filter((r) => r.nsid === UPLOAD);
    assert.equal(uploads.length, 11 + 13);
    assert.ok(
      uploads.every((r) => r.pid === running.child.pid),
      JSON.stringify(uploads.map((r) => r.pid)),
    );
  });
});
