// The forge's records as the CLI reads them: knotless-core's one reader (forge/read.ts), with the
// lexicon documents this package bundles. The shapes, collections and at-uris are the core's.
import { forgeReader } from 'knotless-core/forge/read';
import { lexiconProblem } from './lexicons.ts';

export * from 'knotless-core/forge/records';

const reader = forgeReader(lexiconProblem);

export const parsePull = reader.pull;
export const parsePullStatus = reader.pullStatus;
export const parseIssue = reader.issue;
export const parseIssueState = reader.issueState;
export const parseComment = reader.comment;
export const parseCheck = reader.check;
export const parseProtection = reader.protection;
