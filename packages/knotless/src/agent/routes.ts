import type http from 'node:http';
import { currentCaller, forThisProcess } from 'knotless-core/caller/scope';
import { KnotlessError } from 'knotless-core/errors';
import type { Identity } from 'knotless-core/identity/resolver';
import type { HttpRequest, HttpResponse } from 'knotless-core/xrpc/transport';
import type { AgentHost, AgentView } from './client.ts';
import type { Follower } from './follower.ts';
import type { GroupCommit } from './group-commit.ts';
import { hostHelper } from './helper-host.ts';
import { answerForward, readBody } from './socket-forward.ts';
import { parseWireRefs, writeWireRefs, type WireRef } from './views.ts';

/** What the agent's routes answer with: the follower's views, the forwarder, the group commit. */
export interface RouteParts {
  follower: Follower;
  forward: (target: URL, init: HttpRequest) => Promise<HttpResponse>;
  group: GroupCommit;
  log: (line: string) => void;
  /** What the agent's answers said of the budget for blob uploads at `pds`, and the service it is of. */
  uploads?: (pds: string) => AgentView['uploads'];
}

/**
 * The agent as the helpers it hosts reach it: calls, with the helper's own copies of refs. Each runs
 * as the agent's own work, outside the calling helper's (a stream it starts, a group commit it
 * joins, a line it logs serve every caller; see forThisProcess).
 */
export function hostCalls({ follower, forward, uploads }: RouteParts): AgentHost {
  return {
    forward: (url, init) => {
      // git went away: a request nobody will hear the outcome of is not sent, above all a write.
      if (currentCaller()?.gone?.() === true)
        return Promise.reject(
          new KnotlessError('cancelled', 'git went away before the helper was done; nothing more was sent.'),
        );
      // Its own answer: a group commit hands one answer (a 5xx, a 429) to each helper it refused.
      return forThisProcess(() => forward(url, init)).then((res) => ({
        status: res.status,
        headers: { ...res.headers },
        body: Buffer.from(res.body),
      }));
    },
    view: (did, repo, pds) =>
      forThisProcess(async () => {
        const got = await follower.viewAt({ did, handle: undefined, pds }, repo);
        if (got === undefined) return undefined;
        const figure = uploads?.(pds);
        const passed = figure === undefined ? {} : { uploads: structuredClone(figure) };
        // The helper's own copy: it parses the records as a cold read does.
        if ('table' in got)
          return got.members === undefined
            ? { refs: [], table: structuredClone(got.table), ...passed }
            : {
                refs: [],
                table: structuredClone(got.table),
                members: structuredClone(got.members),
                ...passed,
              };
        const refs = parseWireRefs(got.refs);
        return got.commit === undefined ? { refs, ...passed } : { refs, commit: got.commit, ...passed };
      }),
    // Applied before the call returns; a fault of the views rejects, as the socket's 502 would.
    wrote: (did, repo, change) =>
      forThisProcess(
        () =>
          new Promise<void>((resolve) =>
            resolve(
              follower.wrote(did, repo, {
                ...change,
                written: parseWireRefs(writeWireRefs(change.written ?? [])),
              }),
            ),
          ),
      ),
  };
}

/**
 * The agent's socket, route by route: the same calls as {@link hostCalls}, over HTTP for helpers and
 * commands in processes of their own, and what tests and `knotless agent status` read. Kept apart
 * from the listening socket (server.ts), which only adds the lifecycle's routes and the 502 for a
 * route that failed.
 */
export function routes(
  parts: RouteParts,
): (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void> {
  const { follower, forward, group, log } = parts;
  const host = hostCalls(parts);
  return async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://agent');
    if (url.pathname === '/forward') {
      await answerForward(req, res, forward);
      return;
    }
    if (url.pathname === '/helper' && req.method === 'POST') {
      await hostHelper(req, res, log, host);
      return;
    }
    if (url.pathname === '/view') {
      const owner: Identity = {
        did: url.searchParams.get('did')!,
        handle: undefined,
        pds: url.searchParams.get('pds')!,
      };
      const name = url.searchParams.get('repo')!;
      // The first helper to ask lists for itself; the view is ready for later ones.
      const got = await follower.viewAt(owner, name);
      const figure = got === undefined ? undefined : parts.uploads?.(owner.pds);
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(
          JSON.stringify(
            got === undefined
              ? { confirmed: false }
              : { confirmed: true, ...got, ...(figure === undefined ? {} : { uploads: figure }) },
          ),
        );
      return;
    }
    if (url.pathname === '/wrote' && req.method === 'POST') {
      const body = JSON.parse((await readBody(req)).toString('utf8')) as {
        did: string;
        repo: string;
        invalidate?: boolean;
        written?: WireRef[];
        deleted?: Array<{ key: string; rev: string }>;
        head?: { from?: unknown; to?: unknown; rev?: unknown };
      };
      const { head } = body;
      follower.wrote(body.did, body.repo, {
        invalidate: body.invalidate === true,
        written: parseWireRefs(body.written ?? []),
        deleted: (body.deleted ?? []).map((d) => d.key),
        ...(typeof head?.from === 'string' && typeof head.to === 'string' && typeof head.rev === 'string'
          ? { head: { from: head.from, to: head.to, rev: head.rev } }
          : {}),
      });
      res.writeHead(204).end();
      return;
    }
    if (url.pathname === '/writes') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(group.pending()));
      return;
    }
    if (url.pathname === '/health') {
      res.writeHead(200).end('ok');
      return;
    }
    res.writeHead(404).end();
  };
}
