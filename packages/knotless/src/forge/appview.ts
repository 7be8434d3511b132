import type { Context } from '../context.ts';
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import { XrpcClient, XrpcError, generalFailure } from 'knotless-core/xrpc/client';

/** An author as the appview shows one. */
export interface AuthorView {
  did: string;
  handle?: string;
}

/** The fields of PullView and IssueView (lexicons/dev/knotless/defs.json) the CLI reads. */
export interface SubjectView {
  uri: string;
  cid: string;
  author: AuthorView;
  repo: string;
  title: string;
  body?: string;
  state: string;
  merged?: string;
  labels: string[];
  createdAt: string;
  base?: string;
  head?: { repo: string; branch: string };
  rounds?: { head: string; base: string; pack: { cid: string; size: number }; createdAt: string }[];
}

export interface CommentView {
  uri: string;
  cid: string;
  author: AuthorView;
  subject: string;
  round?: number;
  body: string;
  createdAt: string;
}

/** Narrows an answer field from the appview (nothing from the network is trusted). */
export const isStr = (v: unknown): v is string => typeof v === 'string';

/** A view the appview sent is used only when it has the shape its lexicon promises. */
function checkSubject(v: unknown, url: string): SubjectView {
  const s = v as Partial<SubjectView> | null;
  if (
    typeof s !== 'object' ||
    s === null ||
    !isStr(s.uri) ||
    !isStr(s.cid) ||
    !isStr(s.author?.did) ||
    !isStr(s.repo) ||
    !isStr(s.title) ||
    !isStr(s.state) ||
    !isStr(s.createdAt) ||
    !Array.isArray(s.labels) ||
    !s.labels.every(isStr)
  )
    throw appviewUnreadable(url);
  return s as SubjectView;
}

function checkComment(v: unknown, url: string): CommentView {
  const c = v as Partial<CommentView> | null;
  if (
    typeof c !== 'object' ||
    c === null ||
    !isStr(c.uri) ||
    !isStr(c.author?.did) ||
    !isStr(c.subject) ||
    !isStr(c.body) ||
    !isStr(c.createdAt) ||
    (c.round !== undefined && !Number.isSafeInteger(c.round))
  )
    throw appviewUnreadable(url);
  return c as CommentView;
}

/**
 * The sentence for an appview answer that is not what its lexicon says (`what`: "a view", "a
 * webhook"), one for every appview client of the CLI.
 */
export function appviewUnreadable(url: string, what = 'a view'): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `The appview at ${safeText(url)} answered with something that is not ${what} of its lexicon; check KNOTLESS_APPVIEW.`,
  );
}

/** The appview's forge queries (FORGE.md), at KNOTLESS_APPVIEW. */
export class Appview {
  readonly url: string;
  readonly #client: XrpcClient;

  constructor(ctx: Context, url: string) {
    this.url = url;
    // Not ctx.client(): KNOTLESS_SERVICE redirects PDS requests, never the appview's.
    this.#client = new XrpcClient(url, {
      transport: ctx.transport,
      trace: ctx.config.trace,
      retry: ctx.config.retry,
    });
  }

  /** The configured appview, or undefined when KNOTLESS_APPVIEW is not set. */
  static of(ctx: Context): Appview | undefined {
    return ctx.config.appview === undefined ? undefined : new Appview(ctx, ctx.config.appview);
  }

  async list(kind: 'pulls' | 'issues', repo: string, state: string): Promise<SubjectView[]> {
    const nsid = kind === 'pulls' ? 'dev.knotless.listPulls' : 'dev.knotless.listIssues';
    const out: SubjectView[] = [];
    let cursor: string | undefined;
    // Bounded: a listing that never ends cannot hang the CLI.
    for (let page = 0; page < 100; page++) {
      const res = await this.#query<Record<string, unknown>>(nsid, { repo, state, limit: 100, cursor });
      const items = res[kind];
      if (!Array.isArray(items)) throw appviewUnreadable(this.url);
      out.push(...items.map((i) => checkSubject(i, this.url)));
      const next = res['cursor'];
      if (!isStr(next) || items.length === 0 || next === cursor) return out;
      cursor = next;
    }
    return out;
  }

  /** One pull request or issue with its comments, or undefined when the appview does not know it. */
  async get(
    kind: 'pull' | 'issue',
    uri: string,
  ): Promise<{ view: SubjectView; comments: CommentView[] } | undefined> {
    const nsid = kind === 'pull' ? 'dev.knotless.getPull' : 'dev.knotless.getIssue';
    let res: Record<string, unknown>;
    try {
      res = await this.#client.query<Record<string, unknown>>(nsid, { uri });
    } catch (err) {
      // Not indexed (yet): the caller reads the record from its author's PDS instead.
      if (err instanceof XrpcError && (err.status === 404 || /NotFound$/.test(err.error))) return undefined;
      throw generalFailure(err, `asking the appview ${this.url} (${nsid})`);
    }
    const comments = res['comments'];
    if (!Array.isArray(comments)) throw appviewUnreadable(this.url);
    return {
      view: checkSubject(res[kind], this.url),
      comments: comments.map((c) => checkComment(c, this.url)),
    };
  }

  async #query<T>(nsid: string, params: Record<string, string | number | undefined>): Promise<T> {
    try {
      return await this.#client.query<T>(nsid, params);
    } catch (err) {
      throw generalFailure(err, `asking the appview ${this.url} (${nsid})`);
    }
  }
}
