import fs from 'node:fs';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import { boundToCaller } from 'knotless-core/caller/scope';
import { safeText } from 'knotless-core/text/terminal';
import { isBodySource, type BodySource } from 'knotless-core/xrpc/request-body';
import { HttpPool } from 'knotless-core/xrpc/http-pool';
import type { HttpRequest, HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import {
  parseWireMembers,
  parseWireRefs,
  parseWireTable,
  writeWireRefs,
  type WireMember,
  type WireRef,
  type WireTable,
} from './views.ts';

/**
 * A repository's refs as the agent's view has them, with the commit it is complete at if known; or,
 * for a repository on a ref table, the table's records as the view holds them (`refs` then empty),
 * and for a team each maintainer's table too.
 */
export type AgentView = {
  refs: RemoteRef[];
  commit?: string;
  table?: WireTable;
  members?: WireMember[];
  /**
   * What the answers the agent carried said of the budget for blob uploads at the service it names
   * (UploadBudgets.keep checks it): a push through the agent may upload before any read of its own.
   */
  uploads?: { service: string; status: unknown };
};

/** What a push wrote (so the agent's view is current at once), or that the view was stale. */
export interface WroteChange {
  written?: RemoteRef[];
  deleted?: string[];
  invalidate?: boolean;
  /**
   * The push's one write was swapped on the commit `from` its view was at and made `to`: with the
   * write applied, the account is exactly at `to`.
   */
  head?: { from: string; to: string; rev: string };
}

/** What a command asks of the warm agent: its socket's client, or the agent itself when hosted. */
export interface AgentLink {
  /** True until a call found the agent gone. */
  readonly alive: boolean;
  /** A transport whose requests the agent sends on (ref writes grouped), `direct` once it is gone. */
  transport(direct: Transport): Transport;
  view(did: string, repo: string, pds: string): Promise<AgentView | undefined>;
  wrote(did: string, repo: string, change: WroteChange): Promise<void>;
}

/**
 * The agent as the helpers it hosts (helper-host.ts) reach it: in its own process, so that a hosted
 * push's request, view and notice are calls, not exchanges over its own socket. What it hands back is
 * the helper's own copy (refs are decoded afresh), never the views' objects.
 */
export interface AgentHost {
  forward(url: URL, init: HttpRequest): Promise<HttpResponse>;
  view(did: string, repo: string, pds: string): Promise<AgentView | undefined>;
  wrote(did: string, repo: string, change: WroteChange): Promise<void>;
}

/**
 * The link of a helper the agent hosts. `deadlineMs` is the helper's own limit on one request
 * (KNOTLESS_HTTP_TIMEOUT of its session), which the agent applies as it does for a socket's helper.
 */
export function hostedLink(host: AgentHost, deadlineMs: number | undefined): AgentLink {
  return {
    alive: true,
    transport: () => ({
      request: (url, init) =>
        host.forward(url, {
          ...boundRequest(init),
          ...(init.deadlineMs !== undefined || deadlineMs === undefined ? {} : { deadlineMs }),
        }),
      // The agent's connections are open already.
      close: () => {},
    }),
    view: (did, repo, pds) => host.view(did, repo, pds),
    wrote: (did, repo, change) => host.wrote(did, repo, change),
  };
}

/**
 * A hosted helper's request with its own callbacks (a download's sink and head, an upload's source)
 * bound to its caller: the agent runs the request as its own work (see forThisProcess), and what the
 * helper's code does when called back must still be done in the helper's directory and environment.
 */
function boundRequest(init: HttpRequest): HttpRequest {
  const { sink, onHead, body } = init;
  return {
    ...init,
    ...(sink === undefined ? {} : { sink: boundToCaller(sink) }),
    ...(onHead === undefined ? {} : { onHead: boundToCaller(onHead) }),
    ...(isBodySource(body) ? { body: boundSource(body) } : {}),
  };
}

function boundSource(source: BodySource): BodySource {
  const open = boundToCaller(() => source.open()[Symbol.asyncIterator]());
  return {
    length: source.length,
    open: () => {
      const pieces = open();
      const next = boundToCaller(() => pieces.next());
      const end = boundToCaller(async (): Promise<IteratorResult<Uint8Array>> => {
        await pieces.return?.();
        return { done: true, value: undefined };
      });
      return { [Symbol.asyncIterator]: () => ({ next, return: end }) };
    },
  };
}

/**
 * Talks to a running warm agent over its Unix socket: forwards requests (the agent's connections
 * to the PDS are already open) and asks for its views of repositories. When the agent is not
 * there, every call falls back, silently, to what the helper would do without it.
 */
export class AgentClient implements AgentLink {
  readonly #socket: string;
  readonly #pool: HttpPool;
  readonly #deadlineMs: number | undefined;
  #alive = true;

  /**
   * `deadlineMs` is this process's limit on one request (KNOTLESS_HTTP_TIMEOUT): the agent applies
   * its own to the PDS, and a little more is allowed here so that its sentence, not ours, arrives.
   */
  constructor(socket: string, deadlineMs?: number) {
    this.#socket = socket;
    this.#deadlineMs = deadlineMs;
    this.#pool = new HttpPool(deadlineMs === undefined ? {} : { deadlineMs: deadlineMs + 5000 });
  }

  /** An agent client when the socket exists, else undefined. */
  static find(socket: string, deadlineMs?: number): AgentClient | undefined {
    if (!fs.existsSync(socket)) return undefined;
    return new AgentClient(socket, deadlineMs);
  }

  /** True until a call found nobody listening. */
  get alive(): boolean {
    return this.#alive;
  }

  #call(path: string, init: HttpRequest): Promise<HttpResponse> {
    return this.#pool
      .request(
        { kind: 'unix', path: this.#socket },
        { ...init, target: path, headers: { host: 'agent', ...init.headers } },
      )
      .catch((err: NodeJS.ErrnoException) => {
        // Nobody listening (ENOENT, ECONNREFUSED), or the agent died with our request (its
        // connection reset or cut): it is gone for the rest of this process. A time-out is not that.
        if (err.code !== undefined && AGENT_GONE.has(err.code)) this.#alive = false;
        throw err;
      });
  }

  /** A transport that sends through the agent, and directly once the agent has gone away. */
  transport(direct: Transport): Transport {
    return {
      request: async (url, init) => {
        if (!this.#alive) return direct.request(url, init);
        let res: HttpResponse;
        try {
          const cap = init.maxBytes === undefined ? {} : { 'x-knotless-max-bytes': String(init.maxBytes) };
          // The agent cuts the request at this process's limit, so the sentence names the one in force.
          const limit =
            this.#deadlineMs === undefined ? {} : { 'x-knotless-deadline': String(this.#deadlineMs) };
          res = await this.#call('/forward', {
            ...init,
            headers: { ...init.headers, ...cap, ...limit, 'x-knotless-url': url.href },
          });
        } catch (err) {
          if (this.#alive) throw err;
          const code = (err as NodeJS.ErrnoException).code;
          // Never sent: it goes directly now.
          if (code === 'ENOENT' || code === 'ECONNREFUSED') return direct.request(url, init);
          // The agent died holding it: it may have gone on to the PDS. The caller decides (a request
          // safe to repeat is sent again, directly; a write is read back, see ops/swap-loop.ts).
          throw Object.assign(new Error(`the warm agent went away (${String(code)})`), {
            code: 'EAGENTGONE',
          });
        }
        const code = res.headers['x-knotless-error'];
        if (code === undefined) return res;
        const limit = Number(res.headers['x-knotless-limit'] || NaN);
        throw Object.assign(new Error(res.body.toString('utf8').slice(0, 200)), {
          code,
          ...(Number.isFinite(limit) ? { limit } : {}),
        });
      },
      // The agent's connections are open already; without it, the direct pool warms one.
      preconnect: (url) => {
        if (!this.#alive) direct.preconnect?.(url);
      },
      close: () => {
        this.#pool.close();
        direct.close();
      },
    };
  }

  /**
   * The agent's current view of a repository's refs, or undefined when it has none yet or has gone
   * away (the caller lists instead). An agent that is there but answers wrongly is an error.
   */
  async view(did: string, repo: string, pds: string): Promise<AgentView | undefined> {
    if (!this.#alive) return undefined;
    const q = new URLSearchParams({ did, repo, pds });
    const res = await this.#gone(
      this.#call(`/view?${q.toString()}`, { method: 'GET', headers: {}, body: null }),
    );
    if (res === undefined) return undefined;
    if (res.status !== 200) throw agentAnswer('/view', res);
    const body = JSON.parse(res.body.toString('utf8')) as {
      confirmed: boolean;
      refs?: WireRef[];
      commit?: unknown;
      table?: unknown;
      members?: unknown;
      uploads?: { service?: unknown; status?: unknown };
    };
    const u = body.uploads;
    const uploads =
      typeof u?.service === 'string' ? { uploads: { service: u.service, status: u.status } } : {};
    if (body.confirmed && body.table !== undefined) {
      const table = parseWireTable(body.table);
      return body.members === undefined
        ? { refs: [], table, ...uploads }
        : { refs: [], table, members: parseWireMembers(body.members), ...uploads };
    }
    if (!body.confirmed || body.refs === undefined) return undefined;
    const refs = parseWireRefs(body.refs);
    return typeof body.commit === 'string' ? { refs, commit: body.commit, ...uploads } : { refs, ...uploads };
  }

  /** The answer, or undefined when the call found the agent gone (only that: anything else throws). */
  async #gone(call: Promise<HttpResponse>): Promise<HttpResponse | undefined> {
    try {
      return await call;
    } catch (err) {
      // #call marks the agent dead when it is not there or died mid-exchange (AGENT_GONE).
      if (!this.#alive) return undefined;
      throw err;
    }
  }

  /**
   * Tells the agent what a push wrote (so its view is current at once), or that its view was stale.
   * Nothing to do when the agent has gone; any other failure throws (the caller warns: the push
   * itself is done, and the agent serves a view only once its event stream has caught up).
   */
  async wrote(did: string, repo: string, change: WroteChange): Promise<void> {
    if (!this.#alive) return;
    const body = JSON.stringify({
      did,
      repo,
      invalidate: change.invalidate ?? false,
      written: writeWireRefs(change.written ?? []),
      deleted: (change.deleted ?? []).map((key) => ({ key, rev: '' })),
      ...(change.head === undefined ? {} : { head: change.head }),
    });
    const res = await this.#gone(
      this.#call('/wrote', { method: 'POST', headers: { 'content-type': 'application/json' }, body }),
    );
    if (res !== undefined && res.status !== 204) throw agentAnswer('/wrote', res);
  }
}

/** Connection faults that mean the agent is not there, or died mid-exchange. */
const AGENT_GONE = new Set(['ENOENT', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETRUNCATED']);

/** The error for an answer of the agent that no agent of this version gives. */
function agentAnswer(path: string, res: HttpResponse): Error {
  const text = safeText(res.body.toString('utf8'), 200);
  return new Error(`the warm agent answered ${path} with status ${res.status} (${text})`);
}
