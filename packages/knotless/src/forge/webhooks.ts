// A repository's webhooks at the appview (KNOTLESS_APPVIEW), for `knotless webhook`: each call
// carries a service-auth token that the logged-in account's PDS signs
// (com.atproto.server.getServiceAuth) for the appview's DID and the one method called; the appview
// lets an account manage only its own repositories' webhooks.
import type { SessionAuthorizer } from '../auth/store.ts';
import type { Context } from '../context.ts';
import { appviewUnreadable, isStr } from './appview.ts';
import { KnotlessError } from 'knotless-core/errors';
import { serviceDidOf } from 'knotless-core/identity/service-did';
import type { WebhookMethod } from 'knotless-core/records/collections';
import { safeText } from 'knotless-core/text/terminal';
import { XrpcClient, XrpcError, generalFailure } from 'knotless-core/xrpc/client';

/** A webhook as `dev.knotless.webhook.list` shows one (never its secret). */
export interface WebhookView {
  id: string;
  url: string;
  createdAt: string;
  lastDelivery?: { event: string; state: string; status: number | null };
}

/** What `dev.knotless.webhook.add` answers: the secret, shown this once. */
export interface AddedWebhook {
  id: string;
  url: string;
  secret: string;
  createdAt: string;
}

/** The appview the CLI is pointed at, or one sentence saying how to point it at one. */
export function configuredAppview(ctx: Context): string {
  const url = ctx.config.appview;
  if (url === undefined)
    throw new KnotlessError(
      'usage',
      "Webhooks live at an appview and none is configured; set KNOTLESS_APPVIEW to the appview's address (`knotless dev` sets it).",
    );
  return url;
}

/** One repository's webhooks, managed as the logged-in account, which owns it. */
export class Webhooks {
  readonly #ctx: Context;
  readonly #auth: SessionAuthorizer;
  readonly #appview: string;
  readonly #client: XrpcClient;
  /** The repository's name (the appview's methods take the caller's own repository by name). */
  readonly repo: string;

  constructor(ctx: Context, auth: SessionAuthorizer, appview: string, repo: string) {
    this.#ctx = ctx;
    this.#auth = auth;
    this.#appview = appview;
    this.repo = repo;
    // Not ctx.client(): KNOTLESS_SERVICE redirects PDS requests, never the appview's. No retries: a
    // write sent twice would add a webhook twice.
    this.#client = new XrpcClient(appview, { transport: ctx.transport, trace: ctx.config.trace });
  }

  async list(): Promise<WebhookView[]> {
    const res = await this.#call('dev.knotless.webhook.list', { repo: this.repo });
    const hooks = res['webhooks'];
    if (!Array.isArray(hooks)) throw appviewUnreadable(this.#appview, 'a webhook');
    return hooks.map((v: unknown) => {
      const h = v as Partial<WebhookView> | null;
      if (typeof h !== 'object' || h === null || !isStr(h.id) || !isStr(h.url) || !isStr(h.createdAt))
        throw appviewUnreadable(this.#appview, 'a webhook');
      const last = h.lastDelivery;
      const lastOk =
        last === undefined ||
        (typeof last === 'object' &&
          last !== null &&
          isStr(last.event) &&
          isStr(last.state) &&
          (last.status === null || Number.isSafeInteger(last.status)));
      if (!lastOk) throw appviewUnreadable(this.#appview, 'a webhook');
      return {
        id: h.id,
        url: h.url,
        createdAt: h.createdAt,
        ...(last === undefined ? {} : { lastDelivery: last }),
      };
    });
  }

  async add(url: string, secret: string | undefined): Promise<AddedWebhook> {
    const res = await this.#call('dev.knotless.webhook.add', {
      repo: this.repo,
      url,
      ...(secret === undefined ? {} : { secret }),
    });
    const { id, secret: s, createdAt } = res;
    if (!isStr(id) || !isStr(res['url']) || !isStr(s) || !isStr(createdAt))
      throw appviewUnreadable(this.#appview, 'a webhook');
    return { id, url: res['url'], secret: s, createdAt };
  }

  async remove(id: string): Promise<void> {
    await this.#call('dev.knotless.webhook.remove', { repo: this.repo, id });
  }

  /** Queues a signed ping to the webhook; returns the delivery's id. */
  async test(id: string): Promise<string> {
    const res = await this.#call('dev.knotless.webhook.test', { repo: this.repo, id });
    const d = res['delivery'];
    if (!isStr(d) && !Number.isSafeInteger(d)) throw appviewUnreadable(this.#appview, 'a webhook');
    return String(d);
  }

  /** A token from the account's PDS for the appview and `lxm`, good for one call. */
  async #token(lxm: WebhookMethod): Promise<string> {
    const pds = this.#ctx.client(this.#auth.session.pds, this.#auth);
    let res: { token?: unknown };
    try {
      res = await pds.query('com.atproto.server.getServiceAuth', { aud: serviceDidOf(this.#appview), lxm });
    } catch (err) {
      throw generalFailure(err, 'signing a service-auth token for the appview');
    }
    if (!isStr(res.token))
      throw new KnotlessError(
        'pds-error',
        `Your PDS at ${safeText(this.#auth.session.pds)} answered com.atproto.server.getServiceAuth without a token; try again later.`,
      );
    return res.token;
  }

  async #call(lxm: WebhookMethod, input: Record<string, unknown>): Promise<Record<string, unknown>> {
    const headers = { authorization: `Bearer ${await this.#token(lxm)}` };
    let res: unknown;
    try {
      res =
        lxm === 'dev.knotless.webhook.list'
          ? await this.#client.call('GET', lxm, { params: input as Record<string, string>, headers })
          : await this.#client.call('POST', lxm, { body: input, headers });
    } catch (err) {
      throw this.#refusal(err, lxm);
    }
    if (typeof res !== 'object' || res === null || Array.isArray(res))
      throw appviewUnreadable(this.#appview, 'a webhook');
    return res as Record<string, unknown>;
  }

  /** The appview's refusal as one sentence; its own words only quoted, escaped. */
  #refusal(err: unknown, lxm: string): unknown {
    const at = `The appview at ${safeText(this.#appview)}`;
    if (err instanceof KnotlessError && err.code === 'pds-unreachable')
      return new KnotlessError(
        'pds-unreachable',
        `Could not reach the appview at ${safeText(this.#appview)} (KNOTLESS_APPVIEW); check that it runs and the address, then try again.`,
        { cause: err },
      );
    if (!(err instanceof XrpcError)) return err;
    const said = safeText(err.message, 200);
    if (err.status === 401)
      return new KnotlessError(
        'permission-denied',
        `${at} refused the token your PDS signed for it (${said}); check that KNOTLESS_APPVIEW is the appview's public address.`,
        { cause: err },
      );
    if (err.status === 400 && err.error === 'RepoNotFound')
      return new KnotlessError(
        'repo-missing',
        `${at} knows no repository ${safeText(this.repo)} of yours (${safeText(this.#auth.session.handle)}); check the name, or wait a few seconds for a new one to be indexed.`,
        { cause: err },
      );
    if (err.status === 400 && err.error === 'WebhookNotFound')
      return new KnotlessError(
        'not-found',
        `${safeText(this.repo)} has no such webhook; \`knotless webhook list ${safeText(this.repo)}\` lists them.`,
        { cause: err },
      );
    if (err.status === 400 && err.error === 'InvalidUrl')
      return new KnotlessError('invalid-url', `${at} refused the URL: ${said}`, { cause: err });
    if (err.status === 400)
      return new KnotlessError('usage', `${at} refused the request: ${said}`, { cause: err });
    return new KnotlessError(
      'pds-error',
      `${at} failed ${lxm} (HTTP ${err.status} ${safeText(err.error, 100)}); try again later.`,
      { cause: err },
    );
  }
}
