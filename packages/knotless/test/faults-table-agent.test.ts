// The fault suite's faults of the agent and its batches on a repository on a ref table, the default
// layout (faults-agent has them on ref records): the agent forwards a table's write, and folds
// pushes into one. Every case runs in `npm test` and CI; `npm run faults` runs the same files and
// prints a table of what each case expected and observed (faults/run.ts).
import { TABLE_AGENT_CASES } from './faults/agent-cases.ts';
import { TABLE_GROUP_CASES } from './faults/group-cases.ts';
import { runFaults } from './faults/run.ts';

runFaults('pds: agent on a ref table', [...TABLE_AGENT_CASES, ...TABLE_GROUP_CASES]);
