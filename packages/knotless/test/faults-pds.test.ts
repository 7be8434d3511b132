// The fault suite's PDS faults: errors, cut and slow answers, rate limits, the agent and HTTP/1 hosts failing. Every case runs here, in `npm test` and CI; `npm run faults` runs the
// same files and prints a table of what each case expected and observed (faults/run.ts).
import { runFaultGroup } from './faults/run.ts';

runFaultGroup('pds');
