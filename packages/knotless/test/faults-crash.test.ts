// The fault suite's crash points: the helper, the CLI and compaction killed at each named step. Every case runs here, in `npm test` and CI; `npm run faults` runs the
// same files and prints a table of what each case expected and observed (faults/run.ts).
import { runFaultGroup } from './faults/run.ts';

runFaultGroup('crash');
