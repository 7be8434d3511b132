// Issue 11, items 3 and 6, against the real PLC, PDS and git: every escape case of the fault suite
// runs here on every `npm test` (the fault suite itself runs a seeded sample of its cases).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ESCAPE_CASES } from './faults/escape-cases.ts';
import { useFaultEnv } from './faults/env.ts';

const env = useFaultEnv();

describe('hostile output is escaped; duplicate, mistyped and targetless records are refused', () => {
  for (const c of ESCAPE_CASES) {
    it(c.name, async () => {
      env.proxy.clearFaults();
      try {
        assert.equal(await c.run(env), c.expected);
      } finally {
        env.proxy.clearFaults();
      }
    });
  }
});
