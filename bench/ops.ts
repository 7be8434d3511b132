import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BIN_SCRIPTS } from '../packages/knotless/src/bin/paths.ts';
import type { Client, Timed } from './client.ts';
import type { Rig } from './setup.ts';

/** One measured operation. */
export interface Sample {
  op: string;
  rtt: number;
  ms: number;
  /** Requests that reached the server (the PDS for knotless, git http-backend for the peer). */
  requests: number;
  /** New connections the server saw. */
  connections: number;
}

let files = 0;
function scratchFile(client: Client, text: string): string {
  const f = path.join(client.home, `file-${++files}.txt`);
  fs.writeFileSync(f, text);
  return f;
}

async function commit(client: Client, rtt: number, dir: string, note: string): Promise<void> {
  fs.appendFileSync(path.join(dir, 'notes.txt'), `${note}\n`);
  await client.git(rtt, dir, ['add', '-A']);
  await client.git(rtt, dir, ['commit', '-q', '-m', note]);
}

/** Measures `fn`, counting what reached `front` meanwhile. */
async function measure(
  samples: Sample[],
  op: string,
  rtt: number,
  front: Rig['pdsFront'],
  fn: () => Promise<Timed>,
): Promise<void> {
  front.reset();
  const t = await fn();
  samples.push({ op, rtt, ms: t.ms, requests: front.count(), connections: front.connections });
}

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
  await measure(samples, 'push', rtt, front, () => client.git(rtt, work, ['push', '-q', 'origin', 'main']));
  await measure(samples, 'push-new-branch', rtt, front, () =>
    client.git(rtt, work, ['push', '-q', 'origin', `HEAD:refs/heads/topic-${round}`]),
  );
  await commit(client, rtt, work, 'with appview');
  await measure(samples, 'push-with-appview', rtt, front, () =>
    client.git(rtt, work, ['push', 'origin', 'main'], { KNOTLESS_APPVIEW: 'https://appview.example' }),
  );
  await client.git(rtt, other, ['fetch', '-q']);
  await measure(samples, 'fetch', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  await commit(client, rtt, work, 'for fetch');
  await client.git(rtt, work, ['push', '-q', 'origin', 'main']);
  await measure(samples, 'fetch-small', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  const cache = client.coldCache();
  await measure(samples, 'clone', rtt, front, () =>
    client.git(rtt, client.home, ['clone', '-q', url, path.join(client.home, `clone-${name}`)], {
      KNOTLESS_CACHE_DIR: cache,
    }),
  );
  await measure(samples, 'clone-warm', rtt, front, () =>
    client.git(rtt, client.home, ['clone', '-q', url, path.join(client.home, `clone2-${name}`)], {
      KNOTLESS_CACHE_DIR: cache,
    }),
  );
  await measure(samples, 'repo-commit', rtt, front, () =>
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

  // The same through the warm agent, which keeps its connection to the PDS and its view current.
  const socket = path.join(client.home, `agent-${name}.sock`);
  const agent = await startAgent(client, rtt, socket);
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
    await measure(samples, 'push-agent', rtt, front, () =>
      client.git(rtt, work, ['push', '-q', 'origin', 'main'], viaAgent),
    );
    await measure(samples, 'fetch-agent', rtt, front, () =>
      client.git(rtt, other, ['fetch', '-q'], viaAgent),
    );
    await commit(client, rtt, work, 'for fetch through the agent');
    await client.git(rtt, work, ['push', '-q', 'origin', 'main'], viaAgent);
    await measure(samples, 'fetch-small-agent', rtt, front, () =>
      client.git(rtt, other, ['fetch', '-q'], viaAgent),
    );
    await client.git(rtt, work, ['pull', '-q', '--rebase', 'origin', 'main'], viaAgent);
    await measure(samples, 'repo-commit-agent', rtt, front, () =>
      client.knotless(
        rtt,
        ['repo', 'commit', name, '-m', 'bot', '--add', `bot2.txt=${scratchFile(client, name)}`],
        viaAgent,
      ),
    );
  } finally {
    agent.kill('SIGTERM');
  }
  return samples;
}

function startAgent(client: Client, rtt: number, socket: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [BIN_SCRIPTS['knotless']!, 'agent', '--socket', socket], {
    env: client.env(rtt),
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (/^ready$/m.test(out)) resolve(child);
    });
    child.on('exit', (code) => reject(new Error(`agent exited ${code}`)));
  });
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
  await measure(samples, 'push', rtt, front, () => client.git(rtt, work, ['push', '-q', 'origin', 'main']));
  await measure(samples, 'push-new-branch', rtt, front, () =>
    client.git(rtt, work, ['push', '-q', 'origin', `HEAD:refs/heads/topic-${round}`]),
  );
  await measure(samples, 'fetch', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  await commit(client, rtt, work, 'for fetch');
  await client.git(rtt, work, ['push', '-q', 'origin', 'main']);
  await measure(samples, 'fetch-small', rtt, front, () => client.git(rtt, other, ['fetch', '-q']));
  await measure(samples, 'clone', rtt, front, () =>
    client.git(rtt, client.home, ['clone', '-q', url, path.join(client.home, `peer-clone-${name}`)]),
  );
  return samples;
}
