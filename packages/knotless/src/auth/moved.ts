import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import type { XrpcError } from 'knotless-core/xrpc/client';
import { pdsRefusal } from 'knotless-core/xrpc/pds-errors';
import type { HttpRequest, HttpResponse } from 'knotless-core/xrpc/transport';
import type { AuthServices } from './services.ts';
import type { SessionAuthorizer } from './store.ts';

/**
 * The one sentence for a session made on the PDS its account has since left. No session can follow
 * an account to another PDS: each PDS signs its own access tokens, and keeps its own refresh tokens
 * (password sessions) or its authorization server does (OAuth), so the new PDS honours neither; what
 * atproto's own clients do after a move is log in again. A one-off session does that by itself on
 * the next run, from KNOTLESS_PASSWORD.
 */
export function movedSession(handle: string, from: string, to: string, oneOff: boolean): KnotlessError {
  const name = safeText(handle);
  const moved = `${name} moved from ${safeText(from)} to ${safeText(to)}`;
  return new KnotlessError(
    'session-expired',
    oneOff
      ? `${moved} since this session was made; run the command again to log in there with KNOTLESS_PASSWORD.`
      : `${moved} since you logged in; log in again there with \`knotless login ${name}\`.`,
  );
}

/**
 * A session that notices its account moved, wherever the command learns it: a request about to go
 * to the PDS the account lives on now (the identity cache, updated by a read that followed the
 * account, names another PDS than the session's), or the session's own PDS refusing it as an
 * account it no longer serves (`AccountDeactivated`), after which the DID is resolved afresh. Either
 * way one sentence (exit 4) instead of a token sent where it means nothing.
 */
export class MoveAwareSession implements SessionAuthorizer {
  readonly #inner: SessionAuthorizer;
  readonly #ctx: AuthServices;
  readonly #oneOff: boolean;
  /** The inner session's own sending (OAuth's DPoP), when it has one. */
  readonly send?: (url: URL, init: HttpRequest) => Promise<HttpResponse>;

  constructor(inner: SessionAuthorizer, ctx: AuthServices, oneOff: boolean) {
    this.#inner = inner;
    this.#ctx = ctx;
    this.#oneOff = oneOff;
    if (inner.send !== undefined) this.send = inner.send.bind(inner);
  }

  get session(): SessionAuthorizer['session'] {
    return this.#inner.session;
  }

  headers(): Promise<Record<string, string>> {
    return this.#inner.headers();
  }

  revoke(): Promise<void> {
    return this.#inner.revoke();
  }

  checkService(service: string): void {
    const { did, handle, pds } = this.#inner.session;
    if (this.#ctx.config.service !== undefined || sameOrigin(service, pds)) return;
    const known = this.#ctx.resolver.cache.did(did);
    // Only the account's own new PDS: a write meant for another account's PDS is that PDS's to refuse.
    if (known !== undefined && sameOrigin(known.pds, service))
      throw movedSession(known.handle ?? handle, pds, known.pds, this.#oneOff);
  }

  async renew(rejected: XrpcError): Promise<boolean> {
    if (pdsRefusal(rejected) === 'account-gone' && this.#ctx.config.service === undefined) {
      const { did, handle, pds } = this.#inner.session;
      const now = await this.#ctx.resolver.resolve(did, { fresh: true });
      if (!sameOrigin(now.pds, pds)) throw movedSession(now.handle ?? handle, pds, now.pds, this.#oneOff);
    }
    return this.#inner.renew(rejected);
  }
}

function sameOrigin(a: string, b: string): boolean {
  return new URL(a).origin === new URL(b).origin;
}
