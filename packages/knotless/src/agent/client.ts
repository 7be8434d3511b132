import fs from 'node:fs';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import { safeText } from 'knotless-core/text/terminal';
import { HttpPool } from 'knotless-core/xrpc/http-pool';
import type { HttpRequest, HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import { parseWireRefs, writeWireRefs, type WireRef } from './views.ts';

/**
 * Talks to a running warm agent over its Unix socket: forwards requests (the agent's connections
 * to the PDS are already open) and asks for its views of repositories. When the agent is not
 * there, every call falls back, silently, to what the helper would do without it.
 */
export class AgentClient {
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
  async view(
    did: string,
    repo: string,
    pds: string,
  ): Promise<{ refs: RemoteRef[]; commit?: string } | undefined> {
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
    };
    if (!body.confirmed || body.refs === undefined) return undefined;
    const refs = parseWireRefs(body.refs);
    return typeof body.commit === 'string' ? { refs, commit: body.commit } : { refs };
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
  async wrote(
    did: string,
    repo: string,
    change: { written?: RemoteRef[]; deleted?: string[]; invalidate?: boolean },
  ): Promise<void> {
    if (!this.#alive) return;
    const body = JSON.stringify({
      did,
      repo,
      invalidate: change.invalidate ?? false,
      written: writeWireRefs(change.written ?? []),
      deleted: (change.deleted ?? []).map((key) => ({ key, rev: '' })),
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
