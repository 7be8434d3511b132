// `npm run bench`: times knotless's operations over https at real round-trip times, beside git's own
// smart HTTP behind the same links, and prints a table (see docs/reference/performance.md).
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { bigTable, runBig, type BigResult } from './big.ts';
import { makeClient } from './client.ts';
import { findCeiling, runLimitedSwarm, type LimitedSwarm } from './limits.ts';
import { knotlessRound, loopPushes, peerRound, type Sample } from './ops.ts';
import { ACCOUNT, costTable, summarise, table } from './report.ts';
import { privateRatios } from './private.ts';
import { startRig } from './setup.ts';
import { cpuTable } from './cpu-account.ts';
import { floorMs, nodeFloorRuns } from './floor.ts';
import { requestLines, runSwarm, swarmTable, type SwarmResult, type SwarmVia } from './swarm.ts';

const { values } = parseArgs({
  options: {
    rtt: { type: 'string', default: '0,50,100,200' },
    rounds: { type: 'string', default: '4' },
    plain: { type: 'boolean', default: false },
    json: { type: 'string' },
    swarm: { type: 'string', default: '1,4,16,64' },
    seconds: { type: 'string', default: '20' },
    'swarm-rtt': { type: 'string', default: '50' },
    // How the swarm's pushes reach the PDS: through one warm agent, each on its own, or both.
    'swarm-via': { type: 'string', default: 'agent,direct' },
    // Doubling the largest swarm until a push fails, up to this many agents (0: skip).
    'ceiling-max': { type: 'string', default: '256' },
    // Agents in the swarm run once more on a PDS with rate limits on (0: skip), and the write points
    // left in the account's hourly budget when it starts.
    limited: { type: 'string', default: '16' },
    'limited-leave': { type: 'string', default: '100' },
    // A real repository to mirror-push and clone, both ways.
    big: { type: 'string' },
    // One-line pushes in a row, in the first round at each RTT (0: skip), for the push-loop rows.
    loop: { type: 'string', default: '20' },
    // The swarm's CPU per push by process (git, helper, git under it, agent, PDS): bench/cpu-account.ts.
    cpu: { type: 'boolean', default: false },
  },
});
const rtts = values.rtt.split(',').map(Number);
const rounds = Number(values.rounds);
const plain = values.plain;
loopPushes.n = Number(values.loop);

// Node's own start-up, before the network starts and again after the operations: what the helper's
// figures are read beside on a machine of unknown speed.
const floorRuns = nodeFloorRuns(7);
const rig = await startRig(rtts, plain);
try {
  const client = await makeClient(rig, plain);
  const ours: Sample[] = [];
  const peer: Sample[] = [];
  for (const rtt of rtts) {
    for (let round = 0; round < rounds; round++) {
      process.stderr.write(`rtt ${rtt} ms, round ${round + 1}/${rounds}\n`);
      ours.push(...(await knotlessRound(rig, client, rtt, round)));
      peer.push(...(await peerRound(rig, client, rtt, round)));
    }
  }
  floorRuns.push(...nodeFloorRuns(7));
  const floor = floorMs(floorRuns);
  const oursFig = summarise(ours, rtts);
  const peerFig = summarise(peer, rtts);
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  console.log(
    `knotless bench, ${new Date().toISOString()}, ${os.cpus().length} × ${cpu}, Node ${process.version}`,
  );
  console.log(
    `${process.env['KNOTLESS_PACK_SPLIT'] === undefined ? '' : `KNOTLESS_PACK_SPLIT=${process.env['KNOTLESS_PACK_SPLIT']} `}npm run bench -- ${process.argv.slice(2).join(' ')}`,
  );
  console.log(
    `Node's floor: \`node -e 0\` took ${floor} ms of CPU (median of ${floorRuns.length} runs before and after the operations)`,
  );
  console.log(
    plain
      ? 'plain http, connecting free: the requests alone'
      : 'https (TLS 1.3), TCP handshake charged one RTT',
  );
  console.log('');
  console.log(table(oursFig, peerFig, rtts));
  console.log('');
  console.log(privateRatios(ours, rtts));
  console.log('');
  console.log(
    `The whole cost at the PDS (background compaction included; push-loop rows per push of ${loopPushes.n} in a row), and how many a bsky.social account sustains (${ACCOUNT.pointsPerHour} points an hour, ${ACCOUNT.pointsPerDay} a day, ${ACCOUNT.uploadsPerDay} blob uploads a day)`,
  );
  console.log('');
  console.log(costTable(oursFig, peerFig));
  const swarmRtt = Number(values['swarm-rtt']);
  // Before the swarms: they leave the machine busy for a while (queued writes, compactions).
  let big: BigResult | null = null;
  if (values.big !== undefined) {
    process.stderr.write(`big repository ${values.big} at ${swarmRtt} ms\n`);
    big = await runBig(rig, client, swarmRtt, values.big);
    console.log('');
    console.log(`Big repository (wall time; peak memory of the largest client process)`);
    console.log('');
    console.log(bigTable(big));
  }
  const limitedAgents = Number(values.limited);
  let limited: LimitedSwarm | null = null;
  if (limitedAgents > 0) limited = await limitedRun(limitedAgents, swarmRtt);
  const swarm: SwarmResult[] = [];
  const sizes = values.swarm === '' ? [] : values.swarm.split(',').map(Number);
  if (sizes.length > 0 && !rig.links.has(swarmRtt))
    throw new Error(`--swarm-rtt ${swarmRtt} must be one of --rtt`);
  const vias = values['swarm-via'].split(',').filter((v) => v !== '');
  for (const v of vias)
    if (v !== 'agent' && v !== 'direct') throw new Error(`--swarm-via takes agent, direct or both, not ${v}`);
  for (const n of sizes) {
    for (const via of vias as SwarmVia[]) {
      process.stderr.write(`swarm of ${n} ${via} for ${values.seconds} s at ${swarmRtt} ms\n`);
      swarm.push(await runSwarm(rig, client, swarmRtt, n, Number(values.seconds), via, values.cpu));
    }
  }
  if (swarm.length > 0) {
    console.log('');
    console.log(`Swarm: agents pushing every second to one account, ${values.seconds} s, RTT ${swarmRtt} ms`);
    console.log('');
    console.log(swarmTable(swarm));
    console.log('');
    console.log('PDS requests per push landed, by method');
    console.log('');
    console.log(requestLines(swarm));
    const counted = swarm.flatMap((r) => (r.cpu === undefined ? [] : [{ ...r, cpu: r.cpu }]));
    if (counted.length > 0) {
      console.log('');
      console.log('CPU ms per push landed, by process (bench/cpu-account.ts)');
      console.log('');
      console.log(cpuTable(counted));
    }
  }
  const ceilingMax = Number(values['ceiling-max']);
  const ceiling =
    ceilingMax > 0 && sizes.length > 0
      ? await findCeiling(rig, client, swarmRtt, Math.max(...sizes) * 2, ceilingMax, Number(values.seconds))
      : [];
  if (ceiling.length > 0) {
    const last = ceiling.at(-1)!;
    console.log('');
    console.log(
      last.landed < last.attempted
        ? `Ceiling: the first failures came at ${last.agents} agents (${last.sample_error ?? 'see failures'})`
        : `Ceiling: no push failed up to ${last.agents} agents`,
    );
    console.log('');
    console.log(swarmTable(ceiling));
  }
  if (values.json !== undefined) {
    fs.writeFileSync(
      values.json,
      JSON.stringify(
        {
          node_floor_cpu_ms: floor,
          operations: oursFig,
          peer: peerFig,
          samples: { ours, peer },
          swarm: { runs: swarm, ceiling, limited },
          big,
        },
        null,
        2,
      ),
    );
  }
} finally {
  await rig.close();
}

/** The swarm once more on a network of its own with the PDS's rate limits on, as deployed. */
async function limitedRun(agents: number, rtt: number): Promise<LimitedSwarm> {
  process.stderr.write(`rate-limited swarm of ${agents} at ${rtt} ms\n`);
  const limitedRig = await startRig([rtt], plain, true);
  try {
    const c = await makeClient(limitedRig, plain);
    const r = await runLimitedSwarm(
      limitedRig,
      c,
      rtt,
      agents,
      Number(values.seconds),
      Number(values['limited-leave']),
    );
    console.log('');
    console.log(
      `Rate limits on (PDS_RATE_LIMITS_ENABLED), ${r.points_left_at_start} write points left in the hour when ${agents} agents started:`,
    );
    console.log('');
    console.log(swarmTable([r]));
    if (r.message !== '') console.log(`\nWhat a rate-limited agent reads: ${r.message}`);
    return r;
  } finally {
    await limitedRig.close();
  }
}
