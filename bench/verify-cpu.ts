// The CPU one verified listing of a repository on a ref table costs its reader, apart from Node's
// start and the network: run by bench/verify-cost.ts in a process of its own (the network's PDS runs
// in the parent, so its work is not counted here). It reads the table as every reader does
// (records/verified-read.ts's `verifiedRead`: the proof's CAR decoded, the commit's signature
// checked against the account's key, the tree walked to the record; then the table parsed and its
// refs made), `--runs` times, and prints, as JSON, the process's CPU (user + system) for the first
// read (which loads the proof's libraries) and the median of the others, with verification on and
// with it off (no key: the tree is still walked, the signature is not checked).
import { parseArgs } from 'node:util';
import { accountSigningKey, verifiedRead } from '../packages/knotless-core/src/records/verified-read.ts';
import { parseTableRead, tableRefs } from '../packages/knotless-core/src/records/read-refs.ts';
import { REFS_COLLECTION } from '../packages/knotless-core/src/records/collections.ts';
import { refTableKey } from '../packages/knotless-core/src/records/ref-table.ts';
import type { RemoteRepo } from '../packages/knotless-core/src/records/remote-repo.ts';
import { transportFor } from '../packages/knotless-core/src/xrpc/transport.ts';
import { cpuMs, percentile } from './stats.ts';

const { values } = parseArgs({
  options: {
    pds: { type: 'string' },
    plc: { type: 'string' },
    did: { type: 'string' },
    name: { type: 'string' },
    runs: { type: 'string', default: '50' },
  },
});
const { pds, plc, did, name } = values as Record<'pds' | 'plc' | 'did' | 'name', string>;
const runs = Number(values.runs);
const transport = transportFor({ caCerts: undefined });
// Only what tableRefs reads of a repository: its name and owner.
const remote = { name, owner: { did } } as unknown as RemoteRepo;

async function listing(signingKey: string | undefined): Promise<number> {
  const got = await verifiedRead({
    transport,
    pds,
    did,
    collection: REFS_COLLECTION,
    rkey: refTableKey(name, did, did),
    signingKey,
    name,
  });
  if (!got.found) throw new Error(`${name} has no ref table`);
  const read = parseTableRead(did, name, name, got, []);
  return tableRefs(remote, { ...read, signingKey }).length;
}

const key = await accountSigningKey(transport, did, plc, name);
const out: Record<string, number> = {};
for (const [mode, signingKey] of [
  ['verified', key],
  ['unverified', undefined],
] as const) {
  const samples: number[] = [];
  let refs = 0;
  for (let i = 0; i < runs + 1; i++) {
    const start = process.cpuUsage();
    refs = await listing(signingKey);
    samples.push(cpuMs(start));
  }
  out[`${mode}_first_cpu_ms`] = Math.round(samples[0]! * 10) / 10;
  out[`${mode}_cpu_ms_p50`] = Math.round(percentile(samples.slice(1), 50) * 10) / 10;
  out['refs'] = refs;
}
transport.close();
console.log(JSON.stringify(out));
