import { STATE_FILTERS } from '../../model/states.ts';
import { limitOf, required, type XrpcHandler } from './common.ts';
import { offsetParam, pullView, stateParam, uriParam } from './forge-views.ts';

/** dev.knotless.listPulls: a repository's pull requests, newest first, filtered by state. */
export const listPulls: XrpcHandler = async (site, params) => {
  const repo = uriParam(required(params, 'repo'), 'dev.knotless.repo', 'repo');
  const state = stateParam(params, STATE_FILTERS.pulls);
  const limit = limitOf(params, 50, 100);
  const offset = offsetParam(params);
  const rows = await site.index.forge.pulls(repo.did, repo.rkey, state, limit, offset);
  return { pulls: rows.map(pullView), ...(rows.length === limit ? { cursor: String(offset + limit) } : {}) };
};
