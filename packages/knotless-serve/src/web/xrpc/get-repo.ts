import { actorDid, refView, repoView, required, XrpcHttpError, type XrpcHandler } from './common.ts';

/**
 * dev.knotless.getRepo: one repository with its default branch, its refs, its star count, and the
 * owner's verified revision (`verified`: the newest revision of the owner's signed repository the
 * appview checked, and when; absent when it checked none, and nothing here is then proved).
 */
export const getRepo: XrpcHandler = async (site, params) => {
  const did = await actorDid(site, required(params, 'actor'));
  const name = required(params, 'repo');
  const repo = await site.index.repo(did, name);
  if (repo === undefined) throw new XrpcHttpError(400, 'RepoNotFound', `no repository ${name}`);
  const refs = await site.index.refs(did, name);
  const verified = await site.index.verified(did);
  const head = refs.find((r) => r.ref === 'HEAD')?.symref ?? undefined;
  return {
    ...repoView(site, repo),
    ...(head === undefined || head === null ? {} : { defaultBranch: head }),
    starCount: await site.index.forge.stars(did, name),
    refs: refs.filter((r) => r.ref !== 'HEAD').map(refView),
    ...(verified === undefined ? {} : { verified: { rev: verified.rev, at: verified.at } }),
  };
};
