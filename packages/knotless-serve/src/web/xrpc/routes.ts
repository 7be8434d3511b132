// The XRPC queries, as routes of the appview's table: GET /xrpc/<nsid>, answered in JSON; lexicons
// in lexicons/dev/knotless/.
import type http from 'node:http';
import type { Route } from '../route-table.ts';
import { XrpcHttpError, type XrpcHandler } from './common.ts';
import { getIssue } from './get-issue.ts';
import { getPull } from './get-pull.ts';
import { getRepo } from './get-repo.ts';
import { listChecks } from './list-checks.ts';
import { listIssues } from './list-issues.ts';
import { listPulls } from './list-pulls.ts';
import { listPushes } from './list-pushes.ts';
import { listRefs } from './list-refs.ts';
import { listRepos } from './list-repos.ts';
import { searchRepos } from './search-repos.ts';
import { webhookXrpcRoutes } from './webhooks.ts';

/** Every query the appview answers, by NSID. */
const QUERIES: Record<string, XrpcHandler> = {
  'dev.knotless.listRepos': listRepos,
  'dev.knotless.getRepo': getRepo,
  'dev.knotless.listRefs': listRefs,
  'dev.knotless.searchRepos': searchRepos,
  'dev.knotless.listPushes': listPushes,
  'dev.knotless.listPulls': listPulls,
  'dev.knotless.getPull': getPull,
  'dev.knotless.listIssues': listIssues,
  'dev.knotless.getIssue': getIssue,
  'dev.knotless.listChecks': listChecks,
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

function query(nsid: string, handler: XrpcHandler): Route {
  return {
    method: 'GET',
    path: `/xrpc/${nsid}`,
    answers: 'json',
    async handle({ site, res, url }) {
      try {
        send(res, 200, await handler(site, url.searchParams));
      } catch (err) {
        if (err instanceof XrpcHttpError)
          return void send(res, err.status, { error: err.error, message: err.message });
        site.log(`xrpc ${nsid}: ${String(err)}`);
        send(res, 500, { error: 'InternalServerError', message: 'internal error' });
      }
      return undefined;
    },
  };
}

export const xrpcRoutes: Route[] = [
  ...Object.entries(QUERIES).map(([nsid, handler]) => query(nsid, handler)),
  ...webhookXrpcRoutes,
  {
    // Whatever else is under /xrpc/ is answered in JSON, as XRPC callers read it: a query not
    // served here is 501, a known one asked with another method than GET 405.
    method: 'ANY',
    path: '/xrpc/*',
    answers: 'json',
    csrf: { exempt: 'it only refuses, in JSON, and writes nothing' },
    handle({ res, url }) {
      const nsid = url.pathname.slice('/xrpc/'.length);
      if (QUERIES[nsid] === undefined)
        send(res, 501, { error: 'MethodNotImplemented', message: `${nsid} is not served here` });
      else send(res, 405, { error: 'InvalidRequest', message: 'queries are GET' });
      return undefined;
    },
  },
];
