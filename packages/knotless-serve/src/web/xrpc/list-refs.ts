import { actorDid, refView, required, type XrpcHandler } from './common.ts';

/** dev.knotless.listRefs: the refs of one repository (HEAD included), as the index has them. */
export const listRefs: XrpcHandler = async (site, params) => {
  const did = await actorDid(site, required(params, 'actor'));
  const refs = await site.index.refs(did, required(params, 'repo'));
  return { refs: refs.map(refView) };
};
