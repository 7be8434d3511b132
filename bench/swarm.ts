import fs from 'node:fs';
import path from 'node:path';
import type { Client } from './client.ts';
import type { Rig } from './setup.ts';
import { percentile } from './stats.ts';

/** What N agents pushing at once achieved. */
export interface SwarmResult {
  agents: number;
  seconds: number;
  attempted: number;
  landed: number;
  failures: Record<string, number>;
  p50_ms: number;
  p95_ms: number;
  max_ms: number;
  /** Record writes the PDS accepted per second during the run. */
  writes_per_second: number;
  /** What git printed for the first failed push, if one failed. */
  sample_error?: string;
}

/** Names a failed push by what the user would read in it. */
function failureKind(stderr: string): string {
  if (/rate-limit/i.test(stderr)) return 'rate-limited';
  if (/fetch first|non-fast-forward/.test(stderr)) return 'rejected (remote moved)';
  if (/stale info/.test(stderr)) return 'stale info';
  if (/Could not reach|ECONN|timed out/i.test(stderr)) return 'unreachable';
  return 'other';
}

/**
 * N agents, each with its own clone and branch, all in one account, each committing and pushing a
 * small change every second (as soon as its previous push ends, when that took longer). They run
 * with the defaults agents get: the listing window and background compaction on.
 */
export async function runSwarm(
  rig: Rig,
  client: Client,
  rtt: number,
  agents: number,
  seconds: number,
): Promise<SwarmResult> {
  const name = `swarm-${agents}`;
  const url = `knotless://alice.test/${name}`;
  const defaults = { KNOTLESS_COMPACT: '1' };
  await client.knotless(rtt, ['repo', 'create', name]);
  const seed = path.join(client.home, `${name}-seed`);
  fs.mkdirSync(seed);
  await client.git(rtt, seed, ['init', '-q', '-b', 'main']);
  fs.writeFileSync(path.join(seed, 'README.md'), 'swarm\n');
  await client.git(rtt, seed, ['add', '-A']);
  await client.git(rtt, seed, ['commit', '-q', '-m', 'seed']);
  await client.git(rtt, seed, ['push', '-q', url, 'main']);
  const dirs: string[] = [];
  for (let i = 0; i < agents; i++) {
    const dir = path.join(client.home, `${name}-agent-${i}`);
    await client.git(rtt, client.home, ['clone', '-q', url, dir]);
    await client.git(rtt, dir, ['checkout', '-q', '-b', `agent-${i}`]);
    dirs.push(dir);
  }

  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  let attempted = 0;
  let landed = 0;
  let sample: string | undefined;
  rig.pdsFront.reset();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    dirs.map(async (dir, i) => {
      for (let n = 0; performance.now() < deadline; n++) {
        const tick = performance.now();
        fs.writeFileSync(path.join(dir, `agent-${i}.txt`), `push ${n}\n`);
        await client.git(rtt, dir, ['add', '-A']);
        await client.git(rtt, dir, ['commit', '-q', '-m', `agent ${i} push ${n}`]);
        attempted++;
        try {
          const t = await client.git(rtt, dir, ['push', '-q', 'origin', `agent-${i}`], defaults);
          latencies.push(t.ms);
          landed++;
        } catch (err) {
          const kind = failureKind(String(err));
          failures[kind] = (failures[kind] ?? 0) + 1;
          sample ??= String(err)
            .split('\n')
            .filter((l) => /knotless:|error:|rejected/.test(l))
            .join(' / ');
        }
        const wait = tick + 1000 - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return {
    agents,
    seconds,
    attempted,
    landed,
    failures,
    p50_ms: Math.round(percentile(latencies, 50)),
    p95_ms: Math.round(percentile(latencies, 95)),
    max_ms: Math.round(Math.max(0, ...latencies)),
    writes_per_second: Math.round((rig.pdsFront.count('com.atproto.repo.putRecord') / elapsed) * 10) / 10,
    ...(sample === undefined ? {} : { sample_error: sample }),
  };
}

/** A Markdown table of swarm runs. */
export function swarmTable(results: SwarmResult[]): string {
  const rows = results.map((r) => {
    const fails =
      Object.entries(r.failures)
        .map(([k, v]) => `${k}: ${v}`)
        .join(', ') || 'none';
    return `| ${r.agents} | ${r.landed}/${r.attempted} | ${fails} | ${r.p50_ms} | ${r.p95_ms} | ${r.max_ms} | ${r.writes_per_second} |`;
  });
  return [
    '| agents | landed/attempted | failures | p50 ms | p95 ms | max ms | record writes/s at the PDS |',
    '| ---: | ---: | --- | ---: | ---: | ---: | ---: |',
    ...rows,
  ].join('\n');
}
