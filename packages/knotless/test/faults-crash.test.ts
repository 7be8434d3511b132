// The fault suite's crash points: the helper and the CLI killed at each named step of a push or a commit. Every case runs in `npm test` and CI; `npm run faults` runs the same
// files and prints a table of what each case expected and observed (faults/run.ts).
import { CRASH_CASES } from './faults/crash-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('crash', CRASH_CASES);
