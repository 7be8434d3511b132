import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startProxy, type Proxy } from 'knotless-devnet';
import { KNOTLESS_BIN } from './helpers/cli.ts';
import { commitFiles, newRepo, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { waitUntil } from './helpers/wait.ts';

const t = useNetwork(['alice.test']);
let proxy: Proxy | undefined;
let socket = '';
let agent: ChildProcess | undefined;
// Repositories stay on ref records (KNOTLESS_REF_TABLE=0): these cases count and prove the warm
// agent's view of ref records (its commit, the stream's record operations); agent-table.test.ts does
// the same for a ref table.
const common = () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_COMPACT: '0',
  ...(proxy ? { KNOTLESS_SERVICE: proxy.url } : {}),
});
/** Environment one test adds to alice's commands. */
let more: Record<string, string> = {};
const alice = useGitUser(t, 'alice.test', () => ({ ...common(), KNOTLESS_AGENT_SOCKET: socket, ...more }));
// Another machine of the same account, without an agent.
const other = useGitUser(t, 'alice.test', () => ({
  KNOTLESS_REF_TABLE: '0',
  KNOTLESS_AGENT: '0',
  KNOTLESS_COMPACT: '0',
}));

async function startAgent(): Promise<void> {
  agent = spawn(process.execPath, [KNOTLESS_BIN, 'agent', '--socket', socket], {
    env: { ...alice.env, ...common() },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    agent!.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve();
    });
    agent!.on('exit', (code) => reject(new Error(`agent exited ${code}`)));
  });
}

before(async () => {
  await t.ready;
  proxy = await startProxy({ target: t.net.pdsUrl });
  socket = path.join(t.tmpdir(), 'agent.sock');
  await startAgent();
});
after(async () => {
  agent?.kill('SIGTERM');
  await proxy?.close();
});

/** Requests and new connections at the PDS while `run` runs. */
async function cost(run: () => Promise<unknown>): Promise<{ requests: string[]; connections: number }> {
  proxy!.reset();
  await run();
  return { requests: proxy!.requests.map((r) => r.nsid ?? r.path), connections: proxy!.connections };
}

/** What the agent holds for a repository of alice's: ref → target. */
async function agentView(repo: string): Promise<Map<string, string>> {
  const http = await import('node:http');
  const q = new URLSearchParams({ did: t.dids['alice.test']!, repo, pds: t.net.pdsUrl });
  const body = await new Promise<string>((resolve, reject) => {
    http
      .get({ socketPath: socket, path: `/view?${q.toString()}` }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve(text));
      })
      .on('error', reject);
  });
  const view = JSON.parse(body) as { refs?: Array<{ record: { ref: string; target?: string } }> };
  return new Map((view.refs ?? []).map((r) => [r.record.ref, r.record.target ?? '']));
}

async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  await waitUntil(what, async () => ((await check()) ? true : undefined), 200);
}

describe('the warm agent', () => {
  it('makes pushes, fetches and repo commits one request each, on a connection already open', async () => {
    assert.equal((await alice.knotless('repo', 'create', 'warm')).code, 0);
    const url = 'knotless://alice.test/warm';
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { a: '1' }, 'one');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');

    // The agent learns the repository from the first push and follows the account from then on.
    const viewed = ['com.atproto.repo.putRecord'];
    await until(async () => {
      await commitFiles(alice, dir, { a: String(Date.now()) }, 'warming');
      const c = await cost(() => alice.ok(dir, 'push', '-q', 'origin', 'main'));
      return c.requests.join() === viewed.join();
    }, 'the agent view');

    // The view answers git at once, and the write's swapCommit (the commit the view is complete at)
    // proves it in the same request; no listing.
    await commitFiles(alice, dir, { a: 'warm push' }, 'warm push');
    assert.deepEqual(await cost(() => alice.ok(dir, 'push', '-q', 'origin', 'main')), {
      requests: viewed,
      connections: 0,
    });
    // A fetch lists the refs and reads the proof that there is no ref table side by side, then
    // proves the listing from the signed tree that proof came with, over the repository's keys:
    // the proofs of the range's ends that proof's path does not hold (none to two in an account
    // this small, side by side), every node within them built from the listing; on the same
    // connections, and no node read.
    const fetched = await cost(() => alice.ok(dir, 'fetch', '-q'));
    const proofs = fetched.requests.filter((r) => r === 'com.atproto.sync.getRecord');
    assert.deepEqual(
      { ...fetched, requests: fetched.requests.filter((r) => r !== 'com.atproto.sync.getRecord').sort() },
      { requests: ['com.atproto.repo.listRecords'], connections: 0 },
    );
    assert.ok(proofs.length >= 1 && proofs.length <= 3, fetched.requests.join(' '));
    const file = path.join(alice.dir(), 'f.txt');
    (await import('node:fs')).writeFileSync(file, 'from a bot\n');
    const commit = await cost(() =>
      alice.knotless('repo', 'commit', 'warm', '-m', 'bot', '--add', `bot.txt=${file}`),
    );
    assert.deepEqual(commit, { requests: ['com.atproto.repo.putRecord'], connections: 0 });

    // A push through the agent leaves this machine's view file as it was (the agent's view took the
    // write): `repo commit` asks the agent first, and still writes in one request.
    await alice.ok(dir, 'fetch', '-q', 'origin');
    await alice.ok(dir, 'reset', '-q', '--hard', 'origin/main');
    await commitFiles(alice, dir, { a: 'after the bot' }, 'after the bot');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    (await import('node:fs')).writeFileSync(file, 'from a bot, again\n');
    const again = await cost(() =>
      alice.knotless('repo', 'commit', 'warm', '-m', 'bot again', '--add', `bot.txt=${file}`),
    );
    assert.deepEqual(again, { requests: ['com.atproto.repo.putRecord'], connections: 0 });
  });

  it("keeps its view current from the account's events when another machine pushes", async () => {
    const url = 'knotless://alice.test/warm';
    const dir = other.dir();
    await other.ok(dir, 'clone', '-q', url, 'c');
    const theirs = await commitFiles(other, `${dir}/c`, { other: 'x' }, 'from another machine');
    await other.ok(`${dir}/c`, 'push', '-q', 'origin', 'main');

    const mine = alice.dir();
    await alice.ok(mine, 'clone', '-q', url, 'c');
    assert.equal((await alice.ok(`${mine}/c`, 'rev-parse', 'HEAD')).trim(), theirs);
    await commitFiles(alice, `${mine}/c`, { mine: 'y' }, 'on top');
    // The agent answers from its view at once: once the stream has delivered the other machine's
    // commit, that is one request (a view the stream had not caught up with would have its swap
    // refused and read the ref again: agent-proof.test.ts).
    await until(
      async () => (await agentView('warm')).get('refs/heads/main') === theirs,
      "the other machine's commit in the agent's view",
    );
    const push = await cost(() => alice.ok(`${mine}/c`, 'push', '-q', 'origin', 'main'));
    assert.deepEqual(push.requests, ['com.atproto.repo.putRecord']);
    assert.equal(
      (await agentView('warm')).get('refs/heads/main'),
      (await alice.ok(`${mine}/c`, 'rev-parse', 'HEAD')).trim(),
    );
  });

  it("cuts an answer past the helper's cap in the agent too, and git hears the helper's sentence", async () => {
    const url = 'knotless://alice.test/warm';
    const dir = await newRepo(alice, url);
    await alice.ok(dir, 'fetch', '-q', 'origin');
    await alice.ok(dir, 'reset', '-q', '--hard', 'origin/main');
    // Random bytes do not compress: the pack is stored as a blob, fetched with getBlob on a clone.
    const crypto = await import('node:crypto');
    await commitFiles(alice, dir, { 'big.bin': crypto.randomBytes(40_000).toString('base64') }, 'big');
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    let sent: number | undefined;
    proxy!.inject({
      nsid: 'com.atproto.sync.getBlob',
      fault: { kind: 'flood', bytes: 10e9, framing: 'chunked', onSent: (n) => (sent = n) },
    });
    const out = alice.dir();
    // A fresh blob cache: the push kept what it uploaded, and the clone must download it.
    more = { KNOTLESS_CACHE_DIR: path.join(out, 'cache') };
    const clone = await cost(() =>
      alice.git(out, 'clone', '-q', url, 'c').then((res) => {
        assert.notEqual(res.code, 0);
        const ours = res.stderr.split('\n').filter((l) => l.startsWith('knotless: '));
        assert.equal(ours.length, 1, res.stderr);
        // The blob's own size, which the agent learnt from the helper; its default cap would say 4 MiB.
        assert.match(
          ours[0]!,
          /getBlob larger than the [\d.]+ (bytes|KiB) allowed for it, so it was cut off/,
        );
      }),
    );
    proxy!.clearFaults();
    more = {};
    // No new connection at the PDS: the request went through the agent's, and the agent cut it.
    assert.equal(clone.connections, 0);
    await until(() => Promise.resolve(sent !== undefined), 'the flood to end');
    assert.ok(sent! < 64 * 1024 * 1024, `the PDS sent ${sent} bytes`);
  });

  it('falls back silently when the agent is gone', async () => {
    agent!.kill('SIGTERM');
    await new Promise((r) => agent!.once('exit', r));
    const dir = await newRepo(alice, 'knotless://alice.test/warm');
    await alice.ok(dir, 'fetch', '-q', 'origin');
    await alice.ok(dir, 'reset', '-q', '--hard', 'origin/main');
    await commitFiles(alice, dir, { after: 'agent' }, 'after the agent');
    const res = await alice.git(dir, 'push', 'origin', 'main');
    assert.equal(res.code, 0, res.stderr);
    assert.doesNotMatch(res.stderr, /^knotless:/m);
  });
});
