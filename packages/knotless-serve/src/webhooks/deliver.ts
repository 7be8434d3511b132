// Posts queued webhook deliveries. Every process of the appview runs one; the queue's claims (with
// a lease) make each delivery go out from one process at a time. At most `concurrency` posts are
// in flight, each cut at `timeoutMs`, so a receiver that hangs, fails or redirects holds one slot
// for at most that long and delays no other delivery beyond it.
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { runGit } from 'knotless-core';
import type { Claimed, WebhookStore } from '../db/webhook-store.ts';
import { checkUrl, guardedAgents } from '../net/guard.ts';

/** How a Deliverer behaves. */
export interface DelivererOptions {
  /** Dev mode: loopback and private receivers allowed. */
  dev: boolean;
  /** Longest one post may take, connection to last byte of the answer. */
  timeoutMs: number;
  /** Wait before the second attempt; the third waits six times as long. */
  retryMs: number;
  /** Posts in flight at once. */
  concurrency: number;
  /** A push's commits, from the repository's mirror once it holds them (empty when it cannot tell). */
  commits: (did: string, repo: string, before: string | null, after: string) => Promise<PushCommit[]>;
  log: (line: string) => void;
}

/** A commit of a push, as its event lists it. */
export interface PushCommit {
  id: string;
  message: string;
  author: { name: string; email: string };
  timestamp: string;
}

/** Commits a push event lists at most, newest first. */
export const PUSH_COMMITS = 20;

/** Bytes of a receiver's answer read (and thrown away) at most. */
const MAX_ANSWER = 64 * 1024;

/** How often the queue is looked at when nothing woke it (another process may have queued). */
const POLL_MS = 500;

/** What one post came to. */
export interface Outcome {
  ok: boolean;
  status: number | null;
  error: string | null;
}

/** `sha256=<hex>`: the HMAC-SHA256 of the body under the webhook's secret. */
export function signature(secret: string, body: string): string {
  return `sha256=${crypto.createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

export class Deliverer {
  readonly #store: WebhookStore;
  readonly #opts: DelivererOptions;
  readonly #agents: ReturnType<typeof guardedAgents>;
  readonly #inflight = new Set<Promise<void>>();
  readonly #requests = new Set<http.ClientRequest>();
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;
  #again = false;
  #closed = false;

  constructor(store: WebhookStore, opts: DelivererOptions) {
    this.#store = store;
    this.#opts = opts;
    // Outside dev mode the agents connect only to public addresses, checked at the socket's own
    // lookup: a name that resolves elsewhere since the webhook was added is refused then.
    this.#agents = guardedAgents(opts.dev);
  }

  start(): void {
    this.#timer = setInterval(() => this.wake(), POLL_MS);
    this.#timer.unref();
    this.wake();
  }

  /** Looks at the queue now (an event was just queued, or a post ended and freed a slot). */
  wake(): void {
    if (this.#closed) return;
    if (this.#ticking) {
      this.#again = true;
      return;
    }
    this.#ticking = true;
    void this.#tick()
      .catch((err: unknown) =>
        this.#opts.log(
          `webhooks: reading the queue failed: ${err instanceof Error ? err.message : String(err)}`,
        ),
      )
      .finally(() => {
        this.#ticking = false;
        if (this.#again) {
          this.#again = false;
          this.wake();
        }
      });
  }

  async #tick(): Promise<void> {
    const free = this.#opts.concurrency - this.#inflight.size;
    // A lease long enough for a push's commits to be read and the post to time out.
    const claimed = await this.#store.claim(free, 3 * this.#opts.timeoutMs);
    for (const d of claimed) {
      const p: Promise<void> = this.#deliver(d)
        .catch((err: unknown) =>
          this.#opts.log(
            `webhooks: delivery ${d.id} failed: ${err instanceof Error ? err.message : String(err)}`,
          ),
        )
        .finally(() => {
          this.#inflight.delete(p);
          this.wake();
        });
      this.#inflight.add(p);
    }
  }

  async #deliver(d: Claimed): Promise<void> {
    let body = d.payload;
    if (d.event === 'push') body = await this.#withCommits(d);
    const outcome = await this.post(d.url, body, {
      'x-knotless-event': d.event,
      'x-knotless-delivery': d.id,
      'x-knotless-signature-256': signature(d.secret, body),
    });
    if (this.#closed) return;
    await this.#store.finish(d, outcome, this.#opts.retryMs * (d.attempts >= 2 ? 6 : 1));
  }

  /** A push's body with its commits, read once and kept so that every attempt posts the same bytes. */
  async #withCommits(d: Claimed): Promise<string> {
    const p = JSON.parse(d.payload) as { before: string | null; after: string | null; commits?: unknown };
    if (p.commits !== undefined) return d.payload;
    const commits =
      p.after === null ? [] : await this.#opts.commits(d.repo_did, d.repo_name, p.before, p.after);
    const body = JSON.stringify({ ...p, commits });
    await this.#store.setPayload(d.id, body);
    return body;
  }

  /** Posts `body` to `target`: never follows a redirect, cut at the time limit. */
  post(target: string, body: string, headers: Record<string, string>): Promise<Outcome> {
    const url = new URL(target);
    try {
      checkUrl(url, this.#opts.dev);
    } catch (err) {
      return Promise.resolve({ ok: false, status: null, error: (err as Error).message });
    }
    return new Promise((resolve) => {
      const mod = url.protocol === 'https:' ? https : http;
      let done = false;
      const end = (o: Outcome): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        this.#requests.delete(req);
        resolve(o);
      };
      const req = mod.request(url, {
        method: 'POST',
        agent: this.#agents[url.protocol as 'http:' | 'https:'],
        headers: {
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
          'user-agent': 'knotless-serve webhooks',
          ...headers,
        },
      });
      this.#requests.add(req);
      const timer = setTimeout(() => {
        req.destroy();
        end({ ok: false, status: null, error: `no answer within ${this.#opts.timeoutMs / 1000} s` });
      }, this.#opts.timeoutMs);
      req.on('error', (err) => end({ ok: false, status: null, error: err.message.slice(0, 300) }));
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER) res.destroy();
        });
        res.on('error', (err) => end({ ok: false, status, error: err.message.slice(0, 300) }));
        res.on('close', () => {
          if (status >= 200 && status < 300) end({ ok: true, status, error: null });
          else if (status >= 300 && status < 400)
            end({ ok: false, status, error: 'the receiver redirected; redirects are not followed' });
          else end({ ok: false, status, error: `the receiver answered ${status}` });
        });
      });
      req.end(body);
    });
  }

  /** Stops taking deliveries and cuts the posts in flight (their leases run out; another attempt follows). */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#timer);
    for (const r of this.#requests) r.destroy();
    await Promise.allSettled([...this.#inflight]);
    this.#agents['http:'].destroy();
    this.#agents['https:'].destroy();
  }
}

/** A push's commits from a bare repository (newest first, at most {@link PUSH_COMMITS}). */
export async function commitsOf(gitDir: string, before: string | null, after: string): Promise<PushCommit[]> {
  const args = ['log', `--max-count=${PUSH_COMMITS}`, '--format=%H%x00%an%x00%ae%x00%aI%x00%B%x1e', after];
  if (before !== null) args.push(`^${before}`);
  const out = await runGit([...args, '--'], { gitDir, okCodes: [128] });
  if (out.code !== 0) return [];
  return out.stdout
    .toString('utf8')
    .split('\x1e')
    .map((r) => r.replace(/^\n/, ''))
    .filter((r) => r !== '')
    .map((r) => {
      const [id = '', name = '', email = '', timestamp = '', ...msg] = r.split('\0');
      return { id, author: { name, email }, timestamp, message: msg.join('\0').replace(/\n+$/, '') };
    });
}
