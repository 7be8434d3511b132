// The fault suite's crash points of compaction on a repository on a ref table, the default layout
// (faults-compact has them on ref records): killed at each named step of a write that folds packs,
// the refs stay whole. Every case runs in `npm test` and CI; `npm run faults` runs the same files and
// prints a table of what each case expected and observed (faults/run.ts).
import { TABLE_COMPACT_CASES } from './faults/compact-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('crash: compaction on a ref table', TABLE_COMPACT_CASES);
