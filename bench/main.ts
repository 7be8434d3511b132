// `npm run bench`: times knotless's operations over https at real round-trip times, beside git's own
// smart HTTP behind the same links, and prints a table (see docs/reference/performance.md).
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { makeClient } from './client.ts';
import { knotlessRound, peerRound, type Sample } from './ops.ts';
import { summarise, table } from './report.ts';
import { startRig } from './setup.ts';

const { values } = parseArgs({
  options: {
    rtt: { type: 'string', default: '0,50,100,200' },
    rounds: { type: 'string', default: '4' },
    plain: { type: 'boolean', default: false },
    json: { type: 'string' },
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
  if (values.json !== undefined) {
    fs.writeFileSync(
      values.json,
      JSON.stringify({ operations: oursFig, peer: peerFig, swarm: null, big: null }, null, 2),
    );
  }
} finally {
  await rig.close();
}
