import fs from 'node:fs';
import path from 'node:path';
import type { Client, Timed } from './client.ts';
import { startAgentProcess } from './local.ts';
import type { Rig } from './setup.ts';
import { privateRound } from './private.ts';

/** One measured operation. */
export interface Sample {
  op: string;
  rtt: number;
  ms: number;
  /** Requests that reached the server (the PDS for knotless, git http-backend for the peer). */
  requests: number;
  /** New connections the server saw. */
  connections: number;
  /** Record writes (putRecord, createRecord, deleteRecord, applyWrites), background work included. */
  writes: number;
  /** Write points the PDS charged (create 3, update 2, delete 1; putRecord 2). */
  points: number;
  /** Blob uploads. */
  uploads: number;
  /** Peak resident memory of the command's largest process, MiB. */
  peakMib: number;
  /** CPU time (user + system) of the command's whole process tree, ms. */
  cpuMs: number;
}

const WRITES = new Set([
  'com.atproto.repo.putRecord',
  'com.atproto.repo.createRecord',
  'com.atproto.repo.deleteRecord',
  'com.atproto.repo.applyWrites',
]);

/**
 * Waits until no background compaction that `client` started runs: each leaves a marker in its
 * cache's `compacting/` until it ends (packages/knotless-core/src/ops/compact-marker.ts).
 */
async function backgroundDone(client: Client): Promise<void> {
  const markers = () =>
    fs
      .readdirSync(client.home)
      .map((d) => path.join(client.home, d, 'compacting'))
      .filter((d) => fs.existsSync(d))
      .flatMap((d) => fs.readdirSync(d));
  const deadline = Date.now() + 120_000;
  while (markers().length > 0) {
    if (Date.now() > deadline)
      throw new Error(`background compactions still running: ${markers().join(', ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** What reached `front` since its reset, background work included. */
function counted(front: Rig['pdsFront']): Omit<Sample, 'op' | 'rtt' | 'ms' | 'peakMib' | 'cpuMs'> {
  const reqs = front.requests;
  return {
    requests: reqs.length,
    connections: front.connections,
    writes: reqs.filter((r) => r.nsid !== undefined && WRITES.has(r.nsid)).length,
    points: reqs.reduce((n, r) => n + r.points, 0),
    uploads: reqs.filter((r) => r.nsid === 'com.atproto.repo.uploadBlob').length,
  };
}

let files = 0;
function scratchFile(client: Client, text: string): string {
  const f = path.join(client.home, `file-${++files}.txt`);
  // Different each time: a repo commit that changes nothing is refused, as git commit refuses it.
  fs.writeFileSync(f, `${text} ${files}\n`);
  return f;
}

async function commit(client: Client, rtt: number, dir: string, note: string): Promise<void> {
  fs.appendFileSync(path.join(dir, 'notes.txt'), `${note}\n`);
  await client.git(rtt, dir, ['add', '-A']);
  await client.git(rtt, dir, ['commit', '-q', '-m', note]);
}

/**
 * Measures `fn`: its time, and what reached `front` until any background work it started has ended
 * (the time does not include that wait; git's own peer starts none).
 */
export async function measure(
  client: Client,
  samples: Sample[],
  op: string,
  rtt: number,
  front: Rig['pdsFront'],
  fn: () => Promise<Timed>,
): Promise<void> {
  front.reset();
  const t = await fn();
  await backgroundDone(client);
  samples.push({ op, rtt, ms: t.ms, peakMib: t.peakMib ?? NaN, cpuMs: t.cpuMs ?? NaN, ...counted(front) });
}

/**
 * `n` one-line pushes in a row (`op`), compaction on: one sample whose counts are the loop's, per
 * push (background included), and whose time and memory are the median push's.
 */
async function measureLoop(
  client: Client,
  samples: Sample[],
  op: string,
  rtt: number,
  front: Rig['pdsFront'],
  dir: string,
  extra: Record<string, string> = {},
): Promise<void> {
  const n = loopPushes.n;
  if (n === 0) return;
  await backgroundDone(client);
  front.reset();
  const runs: Timed[] = [];
  for (let i = 0; i < n; i++) {
    await commit(client, rtt, dir, `loop ${i}`);
    runs.push(await client.git(rtt, dir, ['push', '-q', 'origin', 'main'], extra));
  }
  await backgroundDone(client);
  const c = counted(front);
  const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  samples.push({
    op,
    rtt,
    ms: mid(runs.map((r) => r.ms)),
    peakMib: mid(runs.map((r) => r.peakMib ?? NaN)),
    cpuMs: mid(runs.map((r) => r.cpuMs ?? NaN)),
    requests: c.requests / n,
    connections: c.connections / n,
    writes: c.writes / n,
    points: c.points / n,
    uploads: c.uploads / n,
  });
}

/**
 * 1,000 refs in one push, in the first round at each RTT (performance.md, "A 1,000-ref push"): a
 * mirror push of a new repository holding one commit on main and 1,000 branches, and 1,000 tags
 * pushed to the round's repository. Both are on their ref table (the default), so each is one write
 * of the table (and its parts, past 256 KiB) whatever the number of refs; refs written into
 * packed-refs, a cheap generator.
 */
async function thousandRefs(
  client: Client,
  rtt: number,
  name: string,
  work: string,
  run: (op: string, fn: () => Promise<Timed>) => Promise<void>,
): Promise<void> {
  const mirror = `${name}-mirror`;
  await client.knotless(rtt, ['repo', 'create', mirror]);
  const dir = path.join(client.home, `work-${mirror}`);
  fs.mkdirSync(dir);
  await client.git(rtt, dir, ['init', '-q', '-b', 'main']);
  await client.git(rtt, dir, ['remote', 'add', 'origin', `knotless://alice.test/${mirror}`]);
  await commit(client, rtt, dir, 'first');
  const refs = (cwd: string, prefix: string, tip: string) =>
    fs.appendFileSync(
      path.join(cwd, '.git', 'packed-refs'),
      Array.from({ length: 1000 }, (_, i) => `${tip} ${prefix}${String(i).padStart(4, '0')}\n`).join(''),
    );
  refs(dir, 'refs/heads/b', (await client.git(rtt, dir, ['rev-parse', 'HEAD'])).stdout.trim());
  await run('push-mirror-1000-refs', () => client.git(rtt, dir, ['push', '-q', '--mirror', 'origin']));
  refs(work, `refs/tags/${name}-t`, (await client.git(rtt, work, ['rev-parse', 'HEAD'])).stdout.trim());
  await run('push-1000-tags', () => client.git(rtt, work, ['push', '-q', 'origin', '--tags']));
}

/** How many pushes the loop rows make (0: none); set by main.ts's --loop. */
export const loopPushes = { n: 20 };

/** One round of knotless operations at one RTT, on a fresh repository. */
export async function knotlessRound(rig: Rig, client: Client, rtt: number, round: number): Promise<Sample[]> {
  const samples: Sample[] = [];
  const name = `r${rtt}-${round}`;
  const url = `knotless://alice.test/${name}`;
  await client.knotless(rtt, ['repo', 'create', name]);
  const work = path.join(client.home, `work-${name}`);
  fs.mkdirSync(work);
  await client.git(rtt, work, ['init', '-q', '-b', 'main']);
  await client.git(rtt, work, ['remote', 'add', 'origin', url]);
  await commit(client, rtt, work, 'first');
  await client.git(rtt, work, ['push', '-q', 'origin', 'main']);
  const other = path.join(client.home, `other-${name}`);
  await client.git(rtt, client.home, ['clone', '-q', url, other]);
  const front = rig.pdsFront;

  await commit(client, rtt, work, 'small change');
  await measure(client, samples, 'push', rtt, front, () =>
    client.git(rtt, work, ['push', '-q', 'origin', 'main']),
  );
  await measure(client, samples, 'push-new-branch', rtt, front, () =>
    client.git(rtt, work, ['push', '-q', 'origin', `HEAD:refs/heads/topic-${round}`]),
  );
  await commit(client, rtt, work, 'with appview');
  await measure(client, samples, 'push-with-appview', rtt, front, () =>
    client.git(rtt, work, ['push', 'origin', 'main'], { KNOTLESS_APPVIEW: 'https://appview.example' }),
  );
  await client.git(rtt, other, ['fetch', '-q']);
  await measure(client, samples, 'fetch', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  await commit(client, rtt, work, 'for fetch');
  await client.git(rtt, work, ['push', '-q', 'origin', 'main']);
  await measure(client, samples, 'fetch-small', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  const cache = client.coldCache();
  await measure(client, samples, 'clone', rtt, front, () =>
    client.git(rtt, client.home, ['clone', '-q', url, path.join(client.home, `clone-${name}`)], {
      KNOTLESS_CACHE_DIR: cache,
    }),
  );
  await measure(client, samples, 'clone-warm', rtt, front, () =>
    client.git(rtt, client.home, ['clone', '-q', url, path.join(client.home, `clone2-${name}`)], {
      KNOTLESS_CACHE_DIR: cache,
    }),
  );
  await measure(client, samples, 'repo-commit', rtt, front, () =>
    client.knotless(rtt, [
      'repo',
      'commit',
      name,
      '-m',
      'bot',
      '--add',
      `bot.txt=${scratchFile(client, name)}`,
    ]),
  );

  if (round === 0)
    await thousandRefs(client, rtt, name, work, (op, fn) => measure(client, samples, op, rtt, front, fn));

  // A plain and a private repository side by side (bench/private.ts).
  await privateRound(client, rtt, round, (op, fn) => measure(client, samples, op, rtt, front, fn));

  await client.git(rtt, work, ['pull', '-q', '--rebase', 'origin', 'main']);
  if (round === 0) await measureLoop(client, samples, 'push-loop', rtt, front, work);

  // The same through the warm agent, which keeps its connection to the PDS and its view current.
  const socket = path.join(client.home, `agent-${name}.sock`);
  const agent = await startAgentProcess(socket, client.env(rtt));
  try {
    const viaAgent = { KNOTLESS_AGENT: '1', KNOTLESS_AGENT_SOCKET: socket };
    await client.git(rtt, work, ['pull', '-q', '--rebase', 'origin', 'main'], viaAgent);
    // The agent learns the repository from a first push, then follows its events.
    for (let i = 0; i < 3; i++) {
      await commit(client, rtt, work, `warming ${i}`);
      await client.git(rtt, work, ['push', '-q', 'origin', 'main'], viaAgent);
      await new Promise((r) => setTimeout(r, 700));
    }
    await commit(client, rtt, work, 'through the agent');
    await measure(client, samples, 'push-agent', rtt, front, () =>
      client.git(rtt, work, ['push', '-q', 'origin', 'main'], viaAgent),
    );
    await measure(client, samples, 'fetch-agent', rtt, front, () =>
      client.git(rtt, other, ['fetch', '-q'], viaAgent),
    );
    await commit(client, rtt, work, 'for fetch through the agent');
    await client.git(rtt, work, ['push', '-q', 'origin', 'main'], viaAgent);
    await measure(client, samples, 'fetch-small-agent', rtt, front, () =>
      client.git(rtt, other, ['fetch', '-q'], viaAgent),
    );
    await client.git(rtt, work, ['pull', '-q', '--rebase', 'origin', 'main'], viaAgent);
    await measure(client, samples, 'repo-commit-agent', rtt, front, () =>
      client.knotless(
        rtt,
        ['repo', 'commit', name, '-m', 'bot', '--add', `bot2.txt=${scratchFile(client, name)}`],
        viaAgent,
      ),
    );
    await client.git(rtt, work, ['pull', '-q', '--rebase', 'origin', 'main'], viaAgent);
    if (round === 0) await measureLoop(client, samples, 'push-loop-agent', rtt, front, work, viaAgent);
  } finally {
    agent.kill('SIGTERM');
  }
  return samples;
}

/** One round of git's smart HTTP (git http-backend) at one RTT: the peer. */
export async function peerRound(rig: Rig, client: Client, rtt: number, round: number): Promise<Sample[]> {
  const samples: Sample[] = [];
  const name = `r${rtt}-${round}.git`;
  await client.git(rtt, rig.gitRoot, ['init', '-q', '--bare', '-b', 'main', name]);
  const scheme = new URL(rig.gitFront.url).protocol;
  const url = `${scheme}//127.0.0.1:${rig.links.get(rtt)!.git.port}/${name}`;
  const work = path.join(client.home, `peer-work-${name}`);
  fs.mkdirSync(work);
  await client.git(rtt, work, ['init', '-q', '-b', 'main']);
  await client.git(rtt, work, ['remote', 'add', 'origin', url]);
  await commit(client, rtt, work, 'first');
  await client.git(rtt, work, ['push', '-q', 'origin', 'main']);
  const other = path.join(client.home, `peer-other-${name}`);
  await client.git(rtt, client.home, ['clone', '-q', url, other]);
  const front = rig.gitFront;

  await commit(client, rtt, work, 'small change');
  await measure(client, samples, 'push', rtt, front, () =>
    client.git(rtt, work, ['push', '-q', 'origin', 'main']),
  );
  await measure(client, samples, 'push-new-branch', rtt, front, () =>
    client.git(rtt, work, ['push', '-q', 'origin', `HEAD:refs/heads/topic-${round}`]),
  );
  await measure(client, samples, 'fetch', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  await commit(client, rtt, work, 'for fetch');
  await client.git(rtt, work, ['push', '-q', 'origin', 'main']);
  await measure(client, samples, 'fetch-small', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  await measure(client, samples, 'clone', rtt, front, () =>
    client.git(rtt, client.home, ['clone', '-q', url, path.join(client.home, `peer-clone-${name}`)]),
  );
  if (round === 0) await measureLoop(client, samples, 'push-loop', rtt, front, work);
  return samples;
}
