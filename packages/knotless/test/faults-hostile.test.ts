// The fault suite's hostile data: records, packs, identities and names written to do harm. Every case runs here, in `npm test` and CI; `npm run faults` runs the
// same files and prints a table of what each case expected and observed (faults/run.ts).
import { runFaultGroup } from './faults/run.ts';

runFaultGroup('hostile');
