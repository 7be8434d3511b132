// The fault suite's PDS faults: errors, cut, slow and lost answers, rate limits, and readers during compaction. Every case runs in `npm test` and CI; `npm run faults` runs the same
// files and prints a table of what each case expected and observed (faults/run.ts).
import { PDS_CASES } from './faults/pds-cases.ts';
import { READER_CASES } from './faults/reader-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('pds', [...PDS_CASES, ...READER_CASES]);
