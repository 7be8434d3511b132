import type { Client } from './client.ts';
import type { Rig } from './setup.ts';
import { runSwarm, type SwarmResult } from './swarm.ts';

/** A swarm run on a PDS with its rate limits on, after spending the account's write budget down. */
export interface LimitedSwarm extends SwarmResult {
  /** Write points left in the account's hourly budget when the swarm started. */
  points_left_at_start: number;
  /** What a rate-limited agent read on stderr (one sample). */
  message: string;
}

async function xrpc(
  pds: string,
  nsid: string,
  body: unknown,
  token?: string,
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await fetch(`${pds}/xrpc/${nsid}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, unknown> };
}

/**
 * Spends alice's hourly write budget (5,000 points; a create costs 3) with batches of throwaway
 * records, straight at the PDS, until about `leave` points are left, so that a short swarm meets the
 * limit a long-running one would meet after an hour's work. Returns the points left.
 */
export async function spendWriteBudget(rig: Rig, leave: number): Promise<number> {
  const session = await xrpc(rig.net.pdsUrl, 'com.atproto.server.createSession', {
    identifier: 'alice.test',
    password: rig.password,
  });
  const token = String(session.json['accessJwt']);
  const did = String(session.json['did']);
  // Count the points spent until the PDS reports the write bucket itself (it reports whichever of
  // its buckets is tightest: the per-IP one first, then, once lower, the hourly write budget).
  let left = 5000;
  for (let batch = 0; ; batch++) {
    const creates = Math.min(200, Math.floor((left - leave) / 3));
    if (creates < 1) break;
    const writes = Array.from({ length: creates }, (_, i) => ({
      $type: 'com.atproto.repo.applyWrites#create',
      collection: 'dev.knotless.benchBudget',
      rkey: `b${batch}-${i}`,
      value: { n: i },
    }));
    const res = await xrpc(
      rig.net.pdsUrl,
      'com.atproto.repo.applyWrites',
      { repo: did, validate: false, writes },
      token,
    );
    if (res.status === 429) return 0;
    if (res.status !== 200)
      throw new Error(`spending the write budget: ${res.status} ${JSON.stringify(res.json)}`);
    if (res.headers.get('ratelimit-limit') === '5000') left = Number(res.headers.get('ratelimit-remaining'));
    else left -= 3 * creates;
  }
  return left;
}

/** Runs the swarm of `agents` on a rate-limited rig, with `leave` write points left beforehand. */
export async function runLimitedSwarm(
  rig: Rig,
  client: Client,
  rtt: number,
  agents: number,
  seconds: number,
  leave: number,
): Promise<LimitedSwarm> {
  const points = await spendWriteBudget(rig, leave);
  const result = await runSwarm(rig, client, rtt, agents, seconds);
  return { ...result, points_left_at_start: points, message: result.sample_error ?? '' };
}

/**
 * Raises the load from `start` agents, doubling, each pushing every second, until a run has a failed
 * push or `max` agents have run without one. Returns every run; the last says what failed, if anything.
 */
export async function findCeiling(
  rig: Rig,
  client: Client,
  rtt: number,
  start: number,
  max: number,
  seconds: number,
): Promise<SwarmResult[]> {
  const runs: SwarmResult[] = [];
  for (let n = start; n <= max; n *= 2) {
    process.stderr.write(`ceiling: ${n} agents for ${seconds} s at ${rtt} ms\n`);
    const r = await runSwarm(rig, client, rtt, n, seconds);
    runs.push(r);
    if (r.landed < r.attempted) break;
  }
  return runs;
}
