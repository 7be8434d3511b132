// The ingest bench's knotless records: real ones, written to the real reference PDS before the clock
// starts (pushes with `knotless repo commit`, pull requests with `knotless pr create`, issues and
// comments as records), and their frames taken
// from the PDS's own stream, so that what the appview verifies is what a PDS signed. Each write's
// last frame carries the page that shows it once the appview has it.
import fs from 'node:fs';
import path from 'node:path';
import { Subscription } from '@atproto/xrpc-server';
import type { Network } from 'knotless-devnet';
import { runKnotless } from '../../packages/knotless-devnet/src/dev/run-knotless.ts';
import { ready, type ReadyFrame } from './frames.ts';

export interface KnotlessFrame {
  frame: ReadyFrame;
  /** Set on a write's last frame: the page that shows the write, and the text that says so. */
  check?: { kind: string; page: string; text: string };
}

async function xrpc<T>(pds: string, nsid: string, body: unknown, token?: string): Promise<T> {
  const res = await fetch(`${pds}/xrpc/${nsid}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${nsid}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

/** Writes knotless records as alice; `frames` is called once per step of the bench. */
export interface KnotlessWriter {
  did: string;
  /**
   * Writes `count` records (pushes of a new branch, issues, comments and pull requests in turn) and
   * returns their frames.
   */
  frames(count: number): Promise<KnotlessFrame[]>;
}

export async function knotlessWriter(net: Network, dir: string, password: string): Promise<KnotlessWriter> {
  const { did } = await net.ensureAccount('alice.test', password);
  let n = 0;
  let lastIssue: string | undefined;
  let lastBranch: string | undefined;
  let setUp = false;
  return {
    did,
    async frames(count) {
      const r = await knotlessFrames(net, dir, password, did, count, setUp, n, lastIssue, lastBranch);
      setUp = true;
      n = r.n;
      lastIssue = r.lastIssue;
      lastBranch = r.lastBranch;
      return r.frames;
    },
  };
}

async function knotlessFrames(
  net: Network,
  dir: string,
  password: string,
  did: string,
  count: number,
  setUp: boolean,
  from: number,
  issue: string | undefined,
  branch: string | undefined,
): Promise<{
  frames: KnotlessFrame[];
  n: number;
  lastIssue: string | undefined;
  lastBranch: string | undefined;
}> {
  const got: { type: string; body: Record<string, unknown> }[] = [];
  let wake: (() => void) | undefined;
  const ac = new AbortController();
  // From the PDS's first event (and, after a reconnect, from the last one read): no write is missed
  // for want of a connection made in time.
  let seq = 0;
  const sub = new Subscription<Record<string, unknown>>({
    service: net.pdsUrl.replace(/^http/, 'ws'),
    method: 'com.atproto.sync.subscribeRepos',
    signal: ac.signal,
    getParams: () => ({ cursor: seq }),
    validate: (v) => v as Record<string, unknown>,
  });
  const reading = (async () => {
    try {
      for await (const v of sub) {
        const { $type, seq: at, ...body } = v;
        if (typeof at === 'number') seq = at;
        got.push({ type: String($type).replace(/^.*#/, '#'), body });
        wake?.();
      }
    } catch (err) {
      if (!ac.signal.aborted) throw err;
    }
  })();
  const latestRev = async (): Promise<string> => {
    const res = await fetch(`${net.pdsUrl}/xrpc/com.atproto.sync.getLatestCommit?did=${did}`);
    return ((await res.json()) as { rev: string }).rev;
  };
  const frames: KnotlessFrame[] = [];
  let taken = 0;
  /** Waits for the frames of the write just made, and puts `check` on the last. */
  const collect = async (check: KnotlessFrame['check']): Promise<void> => {
    const rev = await latestRev();
    while (!got.slice(taken).some((g) => g.type === '#commit' && g.body['rev'] === rev))
      await new Promise<void>((r) => (wake = r));
    const end = got.findIndex((g, i) => i >= taken && g.type === '#commit' && g.body['rev'] === rev) + 1;
    const mine = got.slice(taken, end).filter((g) => g.type === '#commit' && g.body['repo'] === did);
    taken = end;
    mine.forEach((g, i) =>
      frames.push({ frame: ready(g.type, g.body), ...(i === mine.length - 1 && check ? { check } : {}) }),
    );
  };
  // The account's past, replayed up to its latest commit, is passed over: frames are taken from there.
  const past = await latestRev();
  const isPast = (g: (typeof got)[number]) => g.type === '#commit' && g.body['rev'] === past;
  while (!got.some(isPast)) await new Promise<void>((r) => (wake = r));
  taken = got.findIndex(isPast) + 1;

  const env = {
    KNOTLESS_PLC_URL: net.plcUrl,
    KNOTLESS_DEV_PDS: net.pdsUrl,
    KNOTLESS_CONFIG_DIR: path.join(dir, 'config'),
    KNOTLESS_CACHE_DIR: path.join(dir, 'cache'),
    KNOTLESS_AGENT_IDLE: '0',
    GIT_AUTHOR_NAME: 'Bench',
    GIT_AUTHOR_EMAIL: 'bench@example.com',
    GIT_COMMITTER_NAME: 'Bench',
    GIT_COMMITTER_EMAIL: 'bench@example.com',
  };
  const cli = async (args: string[], input = ''): Promise<string> => {
    const r = await runKnotless(args, env, input);
    if (r.code !== 0) throw new Error(`knotless ${args.join(' ')}: ${r.lastLine}`);
    return r.stdout;
  };
  const file = path.join(dir, 'file.txt');
  if (!setUp) {
    await cli(['login', 'alice.test', '--password'], `${password}\n`);
    await cli(['repo', 'create', 'bench']);
    fs.writeFileSync(file, 'a repository the bench pushes to\n');
    await cli(['repo', 'commit', 'bench', '-m', 'first', '--add', `README.md=${file}`]);
    await collect({ kind: 'repo', page: '/alice.test/bench', text: 'README.md' });
  }
  const { accessJwt } = await xrpc<{ accessJwt: string }>(net.pdsUrl, 'com.atproto.server.createSession', {
    identifier: 'alice.test',
    password,
  });
  const repoUri = `at://${did}/dev.knotless.repo/bench`;
  let lastIssue = issue;
  let lastBranch = branch;
  let n = from;
  while (frames.filter((f) => f.check).length < count) {
    n++;
    const kind = n % 4;
    if (kind === 1) {
      // A push of a new branch to a repository that has history, as coding agents push.
      fs.writeFileSync(file, `push ${n}\n`);
      await cli([
        'repo',
        'commit',
        'bench',
        '--branch',
        `push-${n}`,
        '-m',
        `bench push ${n}`,
        '--add',
        `f${n}.txt=${file}`,
      ]);
      lastBranch = `push-${n}`;
      await collect({ kind: 'push', page: `/alice.test/bench/tree/push-${n}`, text: `f${n}.txt` });
    } else if (kind === 0 && lastBranch !== undefined) {
      // A pull request from the last branch pushed: its round's pack is a blob in alice's PDS.
      const title = `bench pull request ${n}`;
      const out = await cli([
        'pr',
        'create',
        'bench',
        '--head',
        `bench:${lastBranch}`,
        '--title',
        title,
        '--json',
      ]);
      const uri = (JSON.parse(out) as { uri: string }).uri;
      await collect({
        kind: 'pull',
        page: `/alice.test/bench/pulls/${did}/${uri.split('/').at(-1)!}`,
        text: title,
      });
    } else if (kind === 3 && lastIssue !== undefined) {
      const body = `bench comment ${n}`;
      await xrpc(
        net.pdsUrl,
        'com.atproto.repo.createRecord',
        {
          repo: did,
          collection: 'dev.knotless.comment',
          record: { subject: lastIssue, body, createdAt: new Date().toISOString() },
        },
        accessJwt,
      );
      const rkey = lastIssue.split('/').at(-1)!;
      await collect({ kind: 'comment', page: `/alice.test/bench/issues/${did}/${rkey}`, text: body });
    } else {
      const title = `bench issue ${n}`;
      const made = await xrpc<{ uri: string }>(
        net.pdsUrl,
        'com.atproto.repo.createRecord',
        {
          repo: did,
          collection: 'dev.knotless.issue',
          record: { repo: repoUri, title, createdAt: new Date().toISOString() },
        },
        accessJwt,
      );
      lastIssue = made.uri;
      await collect({
        kind: 'issue',
        page: `/alice.test/bench/issues/${did}/${made.uri.split('/').at(-1)!}`,
        text: title,
      });
    }
  }
  ac.abort();
  await reading;
  return { frames, n, lastIssue, lastBranch };
}
