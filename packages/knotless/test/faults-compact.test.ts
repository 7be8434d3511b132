// The fault suite's crash points of compaction: killed at each named step, the refs stay whole. Every case runs in `npm test` and CI; `npm run faults` runs the same
// files and prints a table of what each case expected and observed (faults/run.ts).
import { COMPACT_CASES } from './faults/compact-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('crash: compaction', COMPACT_CASES);
