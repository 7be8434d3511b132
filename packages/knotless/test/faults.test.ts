// The fault suite (issue 7): crash points, PDS faults and hostile data, each case reporting what it
// observed against what it expects. `npm run faults` runs every case (KNOTLESS_FAULTS=all) and
// prints the table; `npm test` runs a seeded sample (KNOTLESS_FAULTS_SEED picks another sample).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { AGENT_CASES } from './faults/agent-cases.ts';
import type { FaultCase } from './faults/checks.ts';
import { COMPACT_CASES } from './faults/compact-cases.ts';
import { CRASH_CASES } from './faults/crash-cases.ts';
import { useFaultEnv } from './faults/env.ts';
import { ESCAPE_CASES } from './faults/escape-cases.ts';
import { GROUP_CASES } from './faults/group-cases.ts';
import { HOSTILE_CASES } from './faults/hostile-cases.ts';
import { IDENTITY_CASES } from './faults/identity-cases.ts';
import { NESTED_CASES } from './faults/nested-cases.ts';
import { HTTP_CASES } from './faults/http-cases.ts';
import { PDS_CASES } from './faults/pds-cases.ts';
import { READER_CASES } from './faults/reader-cases.ts';
import { seededSample } from './faults/sample.ts';

const env = useFaultEnv();
const all = [
  ...PDS_CASES,
  ...HOSTILE_CASES,
  ...CRASH_CASES,
  ...IDENTITY_CASES,
  ...ESCAPE_CASES,
  ...READER_CASES,
  ...HTTP_CASES,
  ...AGENT_CASES,
  ...COMPACT_CASES,
  ...GROUP_CASES,
  ...NESTED_CASES,
];
const only = process.env['KNOTLESS_FAULTS_ONLY'];
const chosen: FaultCase[] =
  only !== undefined
    ? all.filter((c) => c.name.includes(only))
    : process.env['KNOTLESS_FAULTS'] === 'all'
      ? all
      : seededSample(all, Number(process.env['KNOTLESS_FAULTS_SEED'] ?? '7'));
const report = process.env['KNOTLESS_FAULTS_REPORT'];

for (const group of ['pds', 'hostile', 'crash'] as const) {
  describe(`faults: ${group}`, () => {
    for (const c of chosen.filter((x) => x.group === group)) {
      it(c.name, async () => {
        env.proxy.clearFaults();
        let observed: string;
        try {
          observed = await c.run(env);
        } catch (err) {
          observed = `threw: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
        } finally {
          env.proxy.clearFaults();
        }
        if (report !== undefined) {
          const line = { group, name: c.name, expected: c.expected, observed };
          fs.appendFileSync(report, JSON.stringify(line) + '\n');
        }
        assert.equal(observed, c.expected);
      });
    }
  });
}
