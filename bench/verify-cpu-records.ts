// The CPU one proved listing of a repository on ref records costs its reader, apart from Node's
// start and the network: run by bench/verify-cost.ts in a process of its own (the network's PDS runs
// in the parent, so its work is not counted here). Each read is the one every reader of such a
// repository makes (read-refs.ts `readRepoRefs`: the verified read that shows it has no ref table,
// the listing of its records, and the walk of the signed tree over their key range that proves the
// listing whole, format.md "A listing of ref records, proved whole"), through a repository opened
// afresh (nothing of the last read kept but the account's identity and its newest revision), `--runs`
// times. It prints, as JSON, the process's CPU (user + system) for the first read (which loads the
// proof's libraries) and the median of the others, with verification on and with it off
// (KNOTLESS_VERIFY=0: the listing as the PDS gives it). The environment is the bench's (its PDS, PLC
// directory, cache and config directories).
import { parseArgs } from 'node:util';
import { readConfig } from '../packages/knotless-core/src/config/env.ts';
import { readRepoRefs } from '../packages/knotless-core/src/records/read-refs.ts';
import { Context } from '../packages/knotless/src/context.ts';
import { cpuMs, percentile } from './stats.ts';

const { values } = parseArgs({
  options: {
    did: { type: 'string' },
    name: { type: 'string' },
    runs: { type: 'string', default: '50' },
  },
});
const { did, name } = values as Record<'did' | 'name', string>;
const runs = Number(values.runs);

const out: Record<string, number> = {};
for (const mode of ['verified', 'unverified'] as const) {
  const env = { ...process.env, KNOTLESS_VERIFY: mode === 'verified' ? '1' : '0' } as Record<string, string>;
  const ctx = new Context(readConfig(env), { agent: false });
  const owner = await ctx.resolver.resolve(did);
  const samples: number[] = [];
  let refs = 0;
  for (let i = 0; i < runs + 1; i++) {
    const remote = ctx.remoteRepo({ ...owner }, name, (m) => process.stderr.write(`${m}\n`));
    const start = process.cpuUsage();
    refs = (await readRepoRefs(remote)).length;
    samples.push(cpuMs(start));
    if (remote.layout !== 'records') throw new Error(`${name} is not on ref records`);
  }
  out[`${mode}_first_cpu_ms`] = Math.round(samples[0]! * 10) / 10;
  out[`${mode}_cpu_ms_p50`] = Math.round(percentile(samples.slice(1), 50) * 10) / 10;
  out['refs'] = refs;
  ctx.close();
}
console.log(JSON.stringify(out));
