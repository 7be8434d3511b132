import { limitOf, repoView, required, type XrpcHandler } from './common.ts';

/** dev.knotless.searchRepos: repositories whose name, description or owner's handle contains `q`. */
export const searchRepos: XrpcHandler = async (site, params) => {
  const q = required(params, 'q').slice(0, 200);
  const rows = await site.index.search(q, limitOf(params, 25, 100));
  return { repos: rows.map((r) => repoView(site, r)) };
};
