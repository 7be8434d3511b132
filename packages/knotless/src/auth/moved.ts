import { KnotlessError } from 'knotless-core/errors';
import { accountMove, type AccountMove } from 'knotless-core/identity/moved';
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
export function movedSession(handle: string, { from, to }: AccountMove, oneOff: boolean): KnotlessError {
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
    if (this.#ctx.config.service !== undefined || accountMove(pds, service) === undefined) return;
    const known = this.#ctx.resolver.cache.did(did);
    const move = accountMove(pds, known?.pds);
    // Only the account's own new PDS: a write meant for another account's PDS is that PDS's to refuse.
    if (move !== undefined && accountMove(move.to, service) === undefined)
      throw movedSession(known?.handle ?? handle, move, this.#oneOff);
  }

  async renew(rejected: XrpcError): Promise<boolean> {
    if (pdsRefusal(rejected) === 'account-gone' && this.#ctx.config.service === undefined) {
      const { did, handle, pds } = this.#inner.session;
      const now = await this.#ctx.resolver.resolve(did, { fresh: true });
      const move = accountMove(pds, now.pds);
      if (move !== undefined) throw movedSession(now.handle ?? handle, move, this.#oneOff);
    }
    return this.#inner.renew(rejected);
  }
}
