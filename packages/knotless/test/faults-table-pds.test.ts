// The fault suite's PDS faults on a repository on a ref table, the default layout (faults-pds has
// them on ref records, which old repositories keep): errors, cut, slow and lost answers and rate
// limits on the table's verified read and its write. Every case runs in `npm test` and CI; `npm run
// faults` runs the same files and prints a table of what each case expected and observed (faults/run.ts).
import { TABLE_PDS_CASES } from './faults/pds-cases.ts';
import { TABLE_READER_CASES } from './faults/reader-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('pds: ref table', [...TABLE_PDS_CASES, ...TABLE_READER_CASES]);
