// The fault suite's hostile data: records, packs, identities, names and output written to do harm. Every case runs in `npm test` and CI; `npm run faults` runs the same
// files and prints a table of what each case expected and observed (faults/run.ts).
import { ESCAPE_CASES } from './faults/escape-cases.ts';
import { HOSTILE_CASES } from './faults/hostile-cases.ts';
import { IDENTITY_CASES } from './faults/identity-cases.ts';
import { NESTED_CASES } from './faults/nested-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('hostile', [...HOSTILE_CASES, ...IDENTITY_CASES, ...ESCAPE_CASES, ...NESTED_CASES]);
