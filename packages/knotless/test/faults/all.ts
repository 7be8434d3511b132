import { AGENT_CASES } from './agent-cases.ts';
import type { FaultCase } from './checks.ts';
import { COMPACT_CASES } from './compact-cases.ts';
import { CRASH_CASES } from './crash-cases.ts';
import { ESCAPE_CASES } from './escape-cases.ts';
import { GROUP_CASES } from './group-cases.ts';
import { HOSTILE_CASES } from './hostile-cases.ts';
import { HTTP_CASES } from './http-cases.ts';
import { IDENTITY_CASES } from './identity-cases.ts';
import { NESTED_CASES } from './nested-cases.ts';
import { PDS_CASES } from './pds-cases.ts';
import { READER_CASES } from './reader-cases.ts';

/** Every fault case, in the order the table lists them. */
export const ALL_CASES: FaultCase[] = [
  ...PDS_CASES,
  ...HOSTILE_CASES,
  ...CRASH_CASES,
  ...IDENTITY_CASES,
  ...ESCAPE_CASES,
  ...READER_CASES,
  ...HTTP_CASES,
  ...AGENT_CASES,
  ...COMPACT_CASES,
  ...GROUP_CASES,
  ...NESTED_CASES,
];
