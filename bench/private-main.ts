// `npm run bench:private`: only the private rows (bench/private.ts), many rounds, so that the
// private / plain ratios of a push, an 8 MiB push and a cold clone rest on more than a few samples.
// Each round measures the plain repository, then the private one, at each RTT; the load average is
// printed beside the figures, since the machine may be shared.
import os from 'node:os';
import { parseArgs } from 'node:util';
import { makeClient } from './client.ts';
import { measure, type Sample } from './ops.ts';
import { privateRatios, privateRound } from './private.ts';
import { summarise } from './report.ts';
import { startRig } from './setup.ts';

const { values } = parseArgs({
  options: {
    rtt: { type: 'string', default: '0,50' },
    rounds: { type: 'string', default: '8' },
    // The sizes of the large pushes, MiB.
    mib: { type: 'string', default: '8' },
  },
});
const rtts = values.rtt.split(',').map(Number);
const rounds = Number(values.rounds);
const largeMib = values.mib.split(',').map(Number);

const rig = await startRig(rtts, false);
const load = [os.loadavg()];
try {
  const client = await makeClient(rig, false);
  const samples: Sample[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const rtt of rtts) {
      process.stderr.write(`rtt ${rtt} ms, round ${round + 1}/${rounds}\n`);
      await privateRound(
        client,
        rtt,
        round,
        (op, fn) => measure(client, samples, op, rtt, rig.pdsFront, fn),
        largeMib,
      );
    }
    load.push(os.loadavg());
  }
  const fig = summarise(samples, rtts);
  const cpuP50 = (op: string, rtt: number) => {
    const xs = samples
      .filter((s) => s.op === op && s.rtt === rtt)
      .map((s) => s.cpuMs)
      .sort((a, b) => a - b);
    return xs[Math.floor((xs.length - 1) / 2)] ?? NaN;
  };
  console.log(
    `knotless private bench, ${new Date().toISOString()}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown cpu'}, Node ${process.version}`,
  );
  console.log(`npm run bench:private -- ${process.argv.slice(2).join(' ')}`);
  console.log(`load average (1 min) during the run: ${load.map((l) => l[0]!.toFixed(1)).join(', ')}`);
  console.log('');
  console.log(
    `| operation | requests | peak MiB | ${rtts.map((r) => `wall p50 (p95) @${r} ms | CPU p50 @${r} ms`).join(' | ')} |`,
  );
  console.log(`| --- | ---: | ---: | ${rtts.map(() => '---: | ---:').join(' | ')} |`);
  for (const [op, f] of Object.entries(fig))
    console.log(
      `| ${op} | ${f.requests} | ${f.peak_mib} | ${rtts.map((r) => `${f.p50_ms[String(r)]} (${f.p95_ms[String(r)]}) | ${cpuP50(op, r)}`).join(' | ')} |`,
    );
  console.log('');
  console.log(privateRatios(samples, rtts));
} finally {
  await rig.close();
}
