import { actorDid, limitOf, repoView, XrpcHttpError, type XrpcHandler } from './common.ts';

/** dev.knotless.listRepos: repositories, newest first, of one account when `actor` is given. */
export const listRepos: XrpcHandler = async (site, params) => {
  const limit = limitOf(params, 50, 100);
  const offset = Number(params.get('cursor') ?? '0');
  if (!Number.isInteger(offset) || offset < 0) throw new XrpcHttpError(400, 'InvalidRequest', 'bad cursor');
  const actor = params.get('actor');
  const did = actor === null ? undefined : await actorDid(site, actor);
  const rows = await site.index.repos({ ...(did === undefined ? {} : { did }), limit, offset });
  return {
    repos: rows.map((r) => repoView(site, r)),
    ...(rows.length === limit ? { cursor: String(offset + limit) } : {}),
  };
};
