// A signed-in reader's OAuth session as the core's XRPC clients use it: every request to the
// reader's PDS goes through the library's fetch handler (a DPoP proof per request, the server's
// nonces, a refresh when the access token expired or was refused), so the forge's operations run
// unchanged with the reader's authority. Requests to any other server go without the tokens.
import { KnotlessError } from 'knotless-core/errors';
import { accountMove, type AccountMove } from 'knotless-core/identity/moved';
import { safeText } from 'knotless-core/text/terminal';
import type { Authorizer } from 'knotless-core/xrpc/client';
import { isBodySource, type RequestBody } from 'knotless-core/xrpc/request-body';
import type { HttpRequest, HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import type { OAuth, OAuthClient } from './oauth.ts';

type Session = Awaited<ReturnType<OAuthClient['restore']>>;

/** The writer the forge operations take: an authorizer with the account it acts for. */
export type ReaderAuth = Authorizer & { session: { did: string; handle: string; pds: string } };

/** The sentence for a sign-in the PDS no longer honours (the reader signs in again). */
export function signedOut(): KnotlessError {
  return new KnotlessError('session-expired', 'Your sign-in has expired or was revoked; sign in again.');
}

/**
 * The sentence for a sign-in granted by the PDS the account has since left. No OAuth session
 * follows an account to another PDS (each PDS's authorization server keeps its own tokens), so the
 * reader signs in again, there.
 */
export function movedSignIn(handle: string, { from, to }: AccountMove): KnotlessError {
  return new KnotlessError(
    'session-expired',
    `${safeText(handle)} moved from ${safeText(from)} to ${safeText(to)} since you signed in here; sign in again to write there.`,
  );
}

/** What a reader's OAuth session needs from the appview besides the library. */
export interface ReaderAuthContext {
  oauth: OAuth;
  client: OAuthClient;
  transport: Transport;
  /** The PDS that granted the account's stored session (its tokens' audience), if one is stored. */
  grantedBy(did: string): Promise<string | undefined>;
  /** The account's PDS now, resolved afresh. */
  pdsNow(did: string): Promise<string | undefined>;
  /** Ends the account's browser sessions here: its sign-in no longer holds. */
  ended(did: string): Promise<void>;
}

/** Restores the reader's OAuth session and wraps it as an authorizer. */
export async function readerAuth(ctx: ReaderAuthContext, did: string, handle: string): Promise<ReaderAuth> {
  const { oauth, client, transport } = ctx;
  // Read before the library may drop a session it cannot refresh: where the sign-in was granted.
  const granted = await ctx.grantedBy(did);
  /**
   * The sign-in is over: its browser sessions end, and the sentence says whether the account
   * moved to another PDS (the reason a session nobody revoked stops holding) or not.
   */
  const over = async (): Promise<KnotlessError> => {
    await ctx.ended(did);
    const move = granted === undefined ? undefined : accountMove(granted, await ctx.pdsNow(did));
    return move === undefined ? signedOut() : movedSignIn(handle, move);
  };
  let session: Session;
  try {
    session = await client.restore(did, 'auto');
  } catch (err) {
    throw ended(oauth, err) ? await over() : err;
  }
  // The token's audience is the reader's PDS: the only server the tokens go to.
  const pdsOrigin = new URL((await session.getTokenInfo(false)).aud).origin;
  return {
    session: { did, handle, pds: pdsOrigin },
    headers: () => Promise.resolve({}),
    // The library already refreshed and retried once: a token still refused is a sign-in that is
    // over (revoked at the PDS, expired for good, or the account gone from that PDS).
    async renew() {
      throw await over();
    },
    async send(url: URL, init: HttpRequest): Promise<HttpResponse> {
      if (url.origin !== pdsOrigin) return transport.request(url, init);
      let res: Response;
      try {
        res = await session.fetchHandler(`${url.pathname}${url.search}`, {
          method: init.method,
          headers: init.headers,
          ...(init.body === null ? {} : { body: (await bodyBytes(init.body)) as BodyInit }),
        });
      } catch (err) {
        if (ended(oauth, err)) throw await over();
        throw new KnotlessError(
          'pds-unreachable',
          `Your PDS could not be reached (${safeText(err instanceof Error ? err.message : String(err), 200)}); try again.`,
          { cause: err },
        );
      }
      const headers: Record<string, string> = {};
      res.headers.forEach((v, k) => (headers[k] = v));
      return { status: res.status, headers, body: Buffer.from(await res.arrayBuffer()) };
    },
  };
}

function ended(oauth: OAuth, err: unknown): boolean {
  return (
    err instanceof oauth.TokenRefreshError ||
    err instanceof oauth.TokenRevokedError ||
    err instanceof oauth.TokenInvalidError
  );
}

/** A request body as bytes: the library may send a request twice (a new DPoP nonce). */
async function bodyBytes(body: RequestBody): Promise<Uint8Array | string | null> {
  if (!isBodySource(body)) return body;
  const pieces: Uint8Array[] = [];
  for await (const piece of body.open()) pieces.push(Buffer.from(piece));
  return Buffer.concat(pieces);
}
