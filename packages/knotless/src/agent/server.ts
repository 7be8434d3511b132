import http from 'node:http';
import type { Identity } from 'knotless-core/identity/resolver';
import { RateBudgets, type UploadBudgets } from 'knotless-core/xrpc/rate-limit';
import { Follower, type FollowerServices } from './follower.ts';
import { forwarder } from './forward.ts';
import { GroupCommit } from './group-commit.ts';
import { TableGroup } from './table-group.ts';
import { AgentLife, type LifeOptions } from './lifecycle.ts';
import { routes } from './routes.ts';

/**
 * What the agent is handed by `knotless agent` (a `Context` is one): the configuration, the direct
 * transport, and clients and ref-record readers made over it, which the follower uses; and what the
 * answers of those clients said of each PDS's budget for blob uploads, which the answers the agent
 * forwards add to and a view passes on.
 */
export type AgentServices = FollowerServices & { readonly uploadBudgets: UploadBudgets };

/** A running agent. */
export interface Agent {
  socket: string;
  /** Lists a repository now, so that the next push to it finds its view ready. */
  warm(owner: Identity, name: string): void;
  /** Stops accepting, answers what is in flight, stops following; then `exit` is called. */
  stop(why: string): void;
}

/**
 * The warm agent: a local process that keeps connections to PDSes open for the helpers that talk to
 * it over a Unix socket, and keeps exact views of the repositories they push to by following each
 * account's event stream. A view answers git's `list for-push` only once the stream has delivered
 * the account's latest revision; anything the agent cannot apply drops the view, and the helper lists.
 */
export async function startAgent(
  ctx: AgentServices,
  socket: string,
  log: (line: string) => void,
  life: LifeOptions,
): Promise<Agent | undefined> {
  // The group commit reports each commit it landed to the follower, which asks it in turn which
  // commits were its own: made one after the other, each reaching the other lazily.
  const follower: Follower = new Follower(ctx, log, () => group);
  // The write budget of each account, from the RateLimit headers of every answer to a write.
  const budgets = new RateBudgets();
  const group = new GroupCommit(
    ctx.transport,
    log,
    (did, rev, writes, commit) => follower.landed(did, rev, writes, commit),
    budgets,
    new TableGroup(ctx.transport, log, follower, budgets),
  );
  const forward = forwarder(ctx.transport, group, budgets, follower, ctx.uploadBudgets);
  const handle = routes({
    follower,
    forward,
    group,
    log,
    uploads: (pds) => {
      // Where the agent's own requests for this PDS go, as its clients name it.
      const service = (ctx.config.service ?? pds).replace(/\/+$/, '');
      const status = ctx.uploadBudgets.status(service);
      return status === undefined ? undefined : { service, status };
    },
  });

  const lifecycle = new AgentLife(socket, log, {
    ...life,
    exit: (why) => {
      follower.stop();
      life.exit(why);
    },
  });
  const server = http.createServer((req, res) => {
    if (lifecycle.answer(req, res)) return;
    handle(req, res).catch((err: unknown) => {
      log(`request failed: ${String(err)}`);
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          error: 'AgentForwardFailed',
          message: err instanceof Error ? err.message : String(err),
        }),
      );
    });
  });
  server.keepAliveTimeout = 60_000;
  // A thin helper's session (helper-host.ts) is one request whose body is git's commands: it lasts
  // as long as git's command, past Node's default of five minutes for receiving a request.
  server.requestTimeout = 0;
  // Another agent already answers at this socket: it serves, this one is not needed.
  if (!(await lifecycle.bind(server))) return undefined;
  return { socket, warm: (owner, name) => follower.load(owner, name), stop: (why) => lifecycle.stop(why) };
}
