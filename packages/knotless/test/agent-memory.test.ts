import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, it } from 'node:test';
import { agentView, spawnAgent } from './helpers/agent.ts';
import { commitFiles, newRepo, repoMaker, useGitUser } from './helpers/git.ts';
import { useNetwork } from './helpers/network.ts';
import { waitUntil } from './helpers/wait.ts';

// The warm agent stays small: it forwards requests and groups ref writes. Measured at
// 7a299d1 (every @atproto library the event stream touches loaded whole): 52 MiB at start, 98 after
// the first push through it, 113 after the third (its stream then decodes and checks commits); with
// only the functions it uses bundled (agent/stream-libs.ts): 67 and 82.
const LIMIT_MIB = 95;

const t = useNetwork(['alice.test']);
let more: Record<string, string> = {};
const alice = useGitUser(t, 'alice.test', () => ({ KNOTLESS_COMPACT: '0', ...more }));
const createRepo = repoMaker(alice, 'alice.test', 'agentmem');

/** A process's peak resident memory so far, in MiB. */
function peakMib(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/^VmHWM:\s+(\d+)/m.exec(status)![1]) / 1024);
}

/** Settles with `p`, or rejects after `ms`: a bound on a wait for a condition, not a stand-in for it. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

describe('the warm agent stays small', () => {
  it(`stays under ${LIMIT_MIB} MiB over three pushes through it, and checks only the commits it did not write`, async () => {
    const url = await createRepo();
    const dir = await newRepo(alice, url);
    await commitFiles(alice, dir, { 'a.txt': 'zero\n' }, 'zero');
    more = { KNOTLESS_AGENT: '0' };
    await alice.ok(dir, 'push', '-q', 'origin', 'main');
    const socket = path.join(t.tmpdir(), 'agent.sock');
    const agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_COMPACT: '0' });
    try {
      more = { KNOTLESS_AGENT_SOCKET: socket, KNOTLESS_AGENT: '1' };
      for (let i = 1; i <= 3; i++) {
        await commitFiles(alice, dir, { 'a.txt': `line ${i}\n` }, `change ${i}`);
        await alice.ok(dir, 'push', '-q', 'origin', 'main');
      }
      // The pushes went through it, and its stream followed them (it loaded what it decodes with).
      assert.match(agent.log(), /following http/);
      const peak = peakMib(agent.child.pid!);
      assert.ok(peak <= LIMIT_MIB, `the agent peaked at ${peak} MiB`);

      // A push that does not go through the agent: its stream checks that commit, and the view has it.
      more = { KNOTLESS_AGENT: '0' };
      const head = await commitFiles(alice, dir, { 'a.txt': 'direct\n' }, 'direct');
      await alice.ok(dir, 'push', '-q', 'origin', 'main');
      const q = { did: t.dids['alice.test']!, repo: url.split('/').pop()!, pds: t.net.pdsUrl };
      await waitUntil("the agent's view to show the direct push", async () =>
        (await agentView(socket, q))?.get('refs/heads/main')?.target === head ? true : undefined,
      );
    } finally {
      await agent.stop();
      more = {};
    }
    // Its own writes were taken from the PDS's answers, not checked again (the stream may deliver
    // one before the answer arrives, then it is checked; the first may precede the stream); the
    // direct push was checked.
    const counts = /: (\d+) commits checked, (\d+) of our own group commits taken as written$/m.exec(
      agent.log(),
    );
    assert.ok(counts !== null, agent.log());
    const [checked, ours] = [Number(counts[1]), Number(counts[2])];
    assert.ok(checked >= 1 && ours >= 1, `${checked} checked, ${ours} ours`);
  });

  it('passes an upload on to the server before the helper has finished sending it', async () => {
    // A server standing in for the PDS: it notes when the first byte of the body arrives.
    const size = 8 * 1024 * 1024;
    const body = crypto.randomBytes(size);
    let firstByte!: () => void;
    const started = new Promise<void>((resolve) => (firstByte = resolve));
    const received = crypto.createHash('sha256');
    let count = 0;
    const server = http.createServer((req, res) => {
      req.on('data', (d: Buffer) => {
        if (count === 0) firstByte();
        count += d.length;
        received.update(d);
      });
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ blob: { size: count } }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const socket = path.join(t.tmpdir(), 'agent.sock');
    const agent = await spawnAgent(socket, { ...alice.env, KNOTLESS_COMPACT: '0' });
    try {
      const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.request({
          socketPath: socket,
          path: '/forward',
          method: 'POST',
          headers: {
            'x-knotless-url': `http://127.0.0.1:${port}/xrpc/com.atproto.repo.uploadBlob`,
            'content-type': 'application/octet-stream',
            'content-length': String(size),
          },
        });
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.on('error', reject);
        // The first megabyte, then nothing until the server has seen the body begin: an agent that
        // read the whole body before forwarding it would wait here for ever.
        req.write(body.subarray(0, 1024 * 1024));
        within(started, 30_000, 'the server receiving the upload while the rest was held back').then(
          () => req.end(body.subarray(1024 * 1024)),
          (err: Error) => {
            req.destroy();
            reject(err);
          },
        );
      });
      const { status, text } = await answer;
      assert.equal(status, 200, text);
      assert.equal(count, size);
      assert.equal(received.digest('hex'), crypto.createHash('sha256').update(body).digest('hex'));
    } finally {
      await agent.stop();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
