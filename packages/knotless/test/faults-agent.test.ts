// The fault suite's faults of the agent, its batches, and HTTP answers that never end. Every case runs in `npm test` and CI; `npm run faults` runs the same
// files and prints a table of what each case expected and observed (faults/run.ts).
import { AGENT_CASES } from './faults/agent-cases.ts';
import { GROUP_CASES } from './faults/group-cases.ts';
import { HTTP_CASES } from './faults/http-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('pds: agent and HTTP', [...HTTP_CASES, ...AGENT_CASES, ...GROUP_CASES]);
