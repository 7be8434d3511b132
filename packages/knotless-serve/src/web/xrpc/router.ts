import type http from 'node:http';
import type { Site } from '../site.ts';
import { XrpcHttpError, type XrpcHandler } from './common.ts';
import { getIssue } from './get-issue.ts';
import { getPull } from './get-pull.ts';
import { getRepo } from './get-repo.ts';
import { listIssues } from './list-issues.ts';
import { listPulls } from './list-pulls.ts';
import { listPushes } from './list-pushes.ts';
import { listRefs } from './list-refs.ts';
import { listRepos } from './list-repos.ts';
import { searchRepos } from './search-repos.ts';

/** Every query the appview answers, by NSID; lexicons in lexicons/dev/knotless/. */
const HANDLERS: Record<string, XrpcHandler> = {
  'dev.knotless.listRepos': listRepos,
  'dev.knotless.getRepo': getRepo,
  'dev.knotless.listRefs': listRefs,
  'dev.knotless.searchRepos': searchRepos,
  'dev.knotless.listPushes': listPushes,
  'dev.knotless.listPulls': listPulls,
  'dev.knotless.getPull': getPull,
  'dev.knotless.listIssues': listIssues,
  'dev.knotless.getIssue': getIssue,
};

function send(res: http.ServerResponse, status: number, body: unknown): void {
  // Past the time limit the 503 has been sent already.
  if (res.headersSent) return;
  res
    .writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'access-control-allow-origin': '*',
    })
    .end(JSON.stringify(body));
}

/** Answers GET /xrpc/<nsid>. */
export async function handleXrpc(
  site: Site,
  nsid: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  params: URLSearchParams,
): Promise<void> {
  const handler = HANDLERS[nsid];
  if (handler === undefined)
    return send(res, 501, { error: 'MethodNotImplemented', message: `${nsid} is not served here` });
  if (req.method !== 'GET' && req.method !== 'HEAD')
    return send(res, 405, { error: 'InvalidRequest', message: 'queries are GET' });
  try {
    send(res, 200, await handler(site, params));
  } catch (err) {
    if (err instanceof XrpcHttpError)
      return send(res, err.status, { error: err.error, message: err.message });
    site.log(`xrpc ${nsid}: ${String(err)}`);
    send(res, 500, { error: 'InternalServerError', message: 'internal error' });
  }
}
