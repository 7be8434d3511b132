import { STATE_FILTERS } from '../../model/states.ts';
import { limitOf, required, type XrpcHandler } from './common.ts';
import { issueView, offsetParam, stateParam, uriParam } from './forge-views.ts';

/** dev.knotless.listIssues: a repository's issues, newest first, filtered by state. */
export const listIssues: XrpcHandler = async (site, params) => {
  const repo = uriParam(required(params, 'repo'), 'dev.knotless.repo', 'repo');
  const state = stateParam(params, STATE_FILTERS.issues);
  const limit = limitOf(params, 50, 100);
  const offset = offsetParam(params);
  const rows = await site.index.forge.issues(repo.did, repo.rkey, state, limit, offset);
  return {
    issues: rows.map(issueView),
    ...(rows.length === limit ? { cursor: String(offset + limit) } : {}),
  };
};
