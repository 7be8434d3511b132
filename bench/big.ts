import fs from 'node:fs';
import path from 'node:path';
import { run, type Client } from './client.ts';
import type { Rig } from './setup.ts';

/** One side's figures for a big repository: wall time and the largest process's peak memory. */
export interface BigSide {
  push_s: number;
  push_peak_mib: number;
  clone_s: number;
  clone_peak_mib: number;
}

/** Mirror-push and cold clone of one real repository, ours and git's smart HTTP. */
export interface BigResult {
  source: string;
  packed_mib: number;
  refs: number;
  rtt: number;
  ours: BigSide;
  peer: BigSide;
}

/**
 * Runs git under GNU time: wall seconds, and the peak resident memory of the largest process in the
 * tree (the kernel carries a reaped child's peak up to its parent, so git's figure covers the
 * helper, pack-objects and index-pack).
 */
async function timedGit(
  client: Client,
  rtt: number,
  cwd: string,
  args: string[],
  extra: Record<string, string> = {},
): Promise<{ s: number; peakMib: number }> {
  const out = path.join(client.home, `time-${process.hrtime.bigint()}`);
  const t = await run('/usr/bin/time', ['-f', '%M', '-o', out, 'git', ...args], {
    cwd,
    env: client.env(rtt, extra),
  });
  const kib = Number(fs.readFileSync(out, 'utf8').trim().split('\n').at(-1));
  return { s: Math.round(t.ms / 100) / 10, peakMib: Math.round(kib / 1024) };
}

async function refsOf(client: Client, rtt: number, gitDir: string): Promise<string> {
  const t = await run('git', ['--git-dir', gitDir, 'for-each-ref', '--format=%(objectname) %(refname)'], {
    cwd: client.home,
    env: client.env(rtt),
  });
  return t.stdout;
}

/** Mirror-pushes `source` (a git repository) both ways at one RTT, clones it back, checks the refs. */
export async function runBig(rig: Rig, client: Client, rtt: number, source: string): Promise<BigResult> {
  // A private mirror copy, so that neither push can touch the user's repository.
  const copy = path.join(client.home, 'big-source.git');
  await run('git', ['clone', '-q', '--mirror', '--no-local', source, copy], {
    cwd: client.home,
    env: client.env(rtt),
  });
  await run('git', ['--git-dir', copy, 'repack', '-a', '-d', '-q'], {
    cwd: client.home,
    env: client.env(rtt),
  });
  const expected = await refsOf(client, rtt, copy);
  const packDir = path.join(copy, 'objects', 'pack');
  const packed = fs
    .readdirSync(packDir)
    .filter((f) => f.endsWith('.pack'))
    .reduce((n, f) => n + fs.statSync(path.join(packDir, f)).size, 0);

  const name = `big-${Date.now()}`;
  await client.knotless(rtt, ['repo', 'create', name]);
  const ourUrl = `knotless://alice.test/${name}`;
  const ourPush = await timedGit(client, rtt, copy, ['push', '-q', '--mirror', ourUrl]);
  const ourDest = path.join(client.home, `${name}-clone.git`);
  const ourClone = await timedGit(client, rtt, client.home, ['clone', '-q', '--mirror', ourUrl, ourDest], {
    KNOTLESS_CACHE_DIR: client.coldCache(),
  });

  await run('git', ['init', '-q', '--bare', `${name}.git`], { cwd: rig.gitRoot, env: client.env(rtt) });
  const scheme = new URL(rig.gitFront.url).protocol;
  const peerUrl = `${scheme}//127.0.0.1:${rig.links.get(rtt)!.git.port}/${name}.git`;
  const peerPush = await timedGit(client, rtt, copy, ['push', '-q', '--mirror', peerUrl]);
  const peerDest = path.join(client.home, `${name}-peer-clone.git`);
  const peerClone = await timedGit(client, rtt, client.home, ['clone', '-q', '--mirror', peerUrl, peerDest]);

  for (const [who, dir] of [
    ['knotless', ourDest],
    ['git smart HTTP', peerDest],
  ] as const) {
    if ((await refsOf(client, rtt, dir)) !== expected)
      throw new Error(`big repository: the ${who} clone's refs differ from the source's`);
  }
  const side = (push: typeof ourPush, clone: typeof ourClone): BigSide => ({
    push_s: push.s,
    push_peak_mib: push.peakMib,
    clone_s: clone.s,
    clone_peak_mib: clone.peakMib,
  });
  return {
    source,
    packed_mib: Math.round((packed / 2 ** 20) * 10) / 10,
    refs: expected.split('\n').filter(Boolean).length,
    rtt,
    ours: side(ourPush, ourClone),
    peer: side(peerPush, peerClone),
  };
}

/** A Markdown table of a big-repository run. */
export function bigTable(r: BigResult): string {
  const ratio = (a: number, b: number) => (b === 0 ? '' : (a / b).toFixed(2));
  return [
    `${r.source}: ${r.refs} refs, ${r.packed_mib} MiB packed, RTT ${r.rtt} ms`,
    '',
    '| operation | knotless s | git smart HTTP s | ratio | knotless peak MiB | git smart HTTP peak MiB |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    `| push --mirror | ${r.ours.push_s} | ${r.peer.push_s} | ${ratio(r.ours.push_s, r.peer.push_s)} | ${r.ours.push_peak_mib} | ${r.peer.push_peak_mib} |`,
    `| clone --mirror (cold cache) | ${r.ours.clone_s} | ${r.peer.clone_s} | ${ratio(r.ours.clone_s, r.peer.clone_s)} | ${r.ours.clone_peak_mib} | ${r.peer.clone_peak_mib} |`,
  ].join('\n');
}
