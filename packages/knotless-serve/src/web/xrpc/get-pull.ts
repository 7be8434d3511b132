import { required, XrpcHttpError, type XrpcHandler } from './common.ts';
import { commentView, pullView, uriParam } from './forge-views.ts';

/** dev.knotless.getPull: one pull request, its state by the authority rule, and its comments. */
export const getPull: XrpcHandler = async (site, params) => {
  const uri = uriParam(required(params, 'uri'), 'dev.knotless.pull', 'uri');
  const pull = await site.index.forge.pull(uri.did, uri.rkey);
  if (pull === undefined) throw new XrpcHttpError(400, 'PullNotFound', 'no such pull request is known here');
  const comments = await site.index.forge.comments('dev.knotless.pull', uri.did, uri.rkey);
  return { pull: pullView(pull), comments: comments.map(commentView) };
};
