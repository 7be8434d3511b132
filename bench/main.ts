// `npm run bench`: times knotless's operations over https at real round-trip times, beside git's own
// smart HTTP behind the same links, and prints a table (see docs/reference/performance.md).
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { makeClient } from './client.ts';
import { knotlessRound, peerRound, type Sample } from './ops.ts';
import { summarise, table } from './report.ts';
import { startRig } from './setup.ts';
import { runSwarm, swarmTable, type SwarmResult } from './swarm.ts';

const { values } = parseArgs({
  options: {
    rtt: { type: 'string', default: '0,50,100,200' },
    rounds: { type: 'string', default: '4' },
    plain: { type: 'boolean', default: false },
    json: { type: 'string' },
    swarm: { type: 'string', default: '1,4,16,64' },
    seconds: { type: 'string', default: '20' },
    'swarm-rtt': { type: 'string', default: '50' },
  },
});
const rtts = values.rtt.split(',').map(Number);
const rounds = Number(values.rounds);
const plain = values.plain;

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
  const oursFig = summarise(ours, rtts);
  const peerFig = summarise(peer, rtts);
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  console.log(
    `knotless bench, ${new Date().toISOString()}, ${os.cpus().length} × ${cpu}, Node ${process.version}`,
  );
  console.log(`npm run bench -- --rtt ${values.rtt} --rounds ${rounds}${plain ? ' --plain' : ''}`);
  console.log(
    plain
      ? 'plain http, connecting free: the requests alone'
      : 'https (TLS 1.3), TCP handshake charged one RTT',
  );
  console.log('');
  console.log(table(oursFig, peerFig, rtts));
  const swarm: SwarmResult[] = [];
  const swarmRtt = Number(values['swarm-rtt']);
  const sizes = values.swarm === '' ? [] : values.swarm.split(',').map(Number);
  if (sizes.length > 0 && !rig.links.has(swarmRtt))
    throw new Error(`--swarm-rtt ${swarmRtt} must be one of --rtt`);
  for (const n of sizes) {
    process.stderr.write(`swarm of ${n} for ${values.seconds} s at ${swarmRtt} ms\n`);
    swarm.push(await runSwarm(rig, client, swarmRtt, n, Number(values.seconds)));
  }
  if (swarm.length > 0) {
    console.log('');
    console.log(`Swarm: agents pushing every second to one account, ${values.seconds} s, RTT ${swarmRtt} ms`);
    console.log('');
    console.log(swarmTable(swarm));
  }
  if (values.json !== undefined) {
    fs.writeFileSync(
      values.json,
      JSON.stringify({ operations: oursFig, peer: peerFig, swarm, big: null }, null, 2),
    );
  }
} finally {
  await rig.close();
}
