// A signed-in reader's OAuth session as the core's XRPC clients use it: every request to the
// reader's PDS goes through the library's fetch handler (a DPoP proof per request, the server's
// nonces, a refresh when the access token expired or was refused), so the forge's operations run
// unchanged with the reader's authority. Requests to any other server go without the tokens.
import { KnotlessError } from 'knotless-core/errors';
import { safeText } from 'knotless-core/text/terminal';
import type { Authorizer } from 'knotless-core/xrpc/client';
import { isBodySource, type RequestBody } from 'knotless-core/xrpc/request-body';
import type { HttpRequest, HttpResponse, Transport } from 'knotless-core/xrpc/transport';
import type { OAuth, OAuthClient } from './oauth.ts';

type Session = Awaited<ReturnType<OAuthClient['restore']>>;

/** The writer the forge operations take: an authorizer with the account it acts for. */
export type ReaderAuth = Authorizer & { session: { did: string; handle: string; pds: string } };

/** The sentence for a session the PDS no longer honours (the reader signs in again). */
export function signedOut(): KnotlessError {
  return new KnotlessError('session-expired', 'Your sign-in has expired or was revoked; sign in again.');
}

/** Restores the reader's OAuth session and wraps it as an authorizer. */
export async function readerAuth(
  oauth: OAuth,
  client: OAuthClient,
  did: string,
  handle: string,
  transport: Transport,
  onEnded: (did: string) => Promise<void>,
): Promise<ReaderAuth> {
  let session: Session;
  try {
    session = await client.restore(did, 'auto');
  } catch (err) {
    throw ended(oauth, err) ? signedOut() : err;
  }
  // The token's audience is the reader's PDS: the only server the tokens go to.
  const pdsOrigin = new URL((await session.getTokenInfo(false)).aud).origin;
  return {
    session: { did, handle, pds: pdsOrigin },
    headers: () => Promise.resolve({}),
    // The library already refreshed and retried once: a token still refused is a sign-in that is
    // over (revoked at the PDS, or expired for good). Its browser sessions end with it.
    async renew() {
      await onEnded(did);
      throw signedOut();
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
        if (ended(oauth, err)) throw signedOut();
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
