// The fault suite's crash points on a repository on a ref table, the default layout (faults-crash has
// them on ref records, which old repositories keep): the helper and the CLI killed at each named step
// of a push, a fetch, a commit or a compaction. Every case runs in `npm test` and CI; `npm run faults`
// runs the same files and prints a table of what each case expected and observed (faults/run.ts).
import { TABLE_CRASH_CASES } from './faults/crash-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('crash: ref table', TABLE_CRASH_CASES);
