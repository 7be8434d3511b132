import { required, XrpcHttpError, type XrpcHandler } from './common.ts';
import { commentView, issueView, uriParam } from './forge-views.ts';

/** dev.knotless.getIssue: one issue, its state by the authority rule, and its comments. */
export const getIssue: XrpcHandler = async (site, params) => {
  const uri = uriParam(required(params, 'uri'), 'dev.knotless.issue', 'uri');
  const issue = await site.index.forge.issue(uri.did, uri.rkey);
  if (issue === undefined) throw new XrpcHttpError(400, 'IssueNotFound', 'no such issue is known here');
  const comments = await site.index.forge.comments('dev.knotless.issue', uri.did, uri.rkey);
  return { issue: issueView(issue), comments: comments.map(commentView) };
};
