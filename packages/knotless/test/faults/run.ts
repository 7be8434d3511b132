import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';
import { ALL_CASES } from './all.ts';
import type { FaultCase } from './checks.ts';
import { useFaultEnv } from './env.ts';

/**
 * Runs every case of one group in the calling test file, in a fault world of its own (one network,
 * one proxy), so that the groups' files run side by side. KNOTLESS_FAULTS_ONLY=text runs only the
 * cases whose name holds it; KNOTLESS_FAULTS_REPORT=file appends each case's row for `npm run faults`.
 */
export function runFaultGroup(group: FaultCase['group']): void {
  const only = process.env['KNOTLESS_FAULTS_ONLY'];
  const report = process.env['KNOTLESS_FAULTS_REPORT'];
  const chosen = ALL_CASES.filter((c) => c.group === group && (only === undefined || c.name.includes(only)));
  if (chosen.length === 0) return;
  const env = useFaultEnv();
  describe(`faults: ${group}`, () => {
    for (const c of chosen) {
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
