// Readers' browser sessions: a random cookie (only its SHA-256 is stored), the account it signed in
// as, and a CSRF token every form carries. The OAuth tokens are not here but in oauth_sessions,
// sealed; this table holds nothing that acts for anyone without the cookie.
import crypto from 'node:crypto';
import type http from 'node:http';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.ts';

export const COOKIE = 'knotless_session';
/** How long a browser session lasts without signing in again. */
const SESSION_MS = 14 * 24 * 60 * 60_000;

/** The signed-in reader of a request. */
export interface Viewer {
  did: string;
  handle: string;
  csrf: string;
  /** The cookie's hash: which browser session this is. */
  idHash: string;
}

const sha256 = (s: string): string => crypto.createHash('sha256').update(s).digest('hex');

/** The value of cookie `name` in a request, if any. */
export function cookieOf(req: http.IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The Set-Cookie header for a session cookie (empty value and Max-Age=0 to remove it). */
export function sessionCookie(value: string, secure: boolean): string {
  const age = value === '' ? 0 : Math.floor(SESSION_MS / 1000);
  return `${COOKIE}=${value}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${age}${secure ? '; Secure' : ''}`;
}

/**
 * The cookies that bind a sign-in to the browser that began it: each sign-in sets its own,
 * `knotless_signin_<id>`, holding a random nonce; the authorization's app state is `<id>.<hash of
 * the nonce>`. One cookie per sign-in, so sign-ins begun in parallel tabs each find theirs. Only
 * the callback reads them (Path), SameSite=Lax because the PDS sends the browser back by a
 * top-level cross-site GET, and they live as long as an authorization may stay in flight.
 */
const SIGNIN_PREFIX = 'knotless_signin_';
const SIGNIN_PATH = '/oauth/callback';
const SIGNIN_MS = 60 * 60_000;

/** A sign-in's binding: the cookie to set, and the app state the server keeps with its state. */
export interface SignInBinding {
  cookie: string;
  appState: string;
}

/** A new sign-in's binding to this browser. */
export function signInBinding(secure: boolean): SignInBinding {
  const id = crypto.randomBytes(9).toString('base64url');
  const nonce = crypto.randomBytes(32).toString('base64url');
  return { cookie: signInCookie(id, nonce, secure), appState: `${id}.${sha256(nonce)}` };
}

/** The Set-Cookie header for sign-in `id`'s nonce (empty value to remove it). */
function signInCookie(id: string, value: string, secure: boolean): string {
  const age = value === '' ? 0 : Math.floor(SIGNIN_MS / 1000);
  return `${SIGNIN_PREFIX}${id}=${value}; Path=${SIGNIN_PATH}; HttpOnly; SameSite=Lax; Max-Age=${age}${secure ? '; Secure' : ''}`;
}

/**
 * Whether the request comes from the browser that began the sign-in whose app state is
 * `appState`: it holds that sign-in's cookie with the nonce whose hash the state keeps. Returns the
 * Set-Cookie header that removes the cookie (the sign-in is spent), or undefined for another
 * browser, whose own cookies are left alone.
 */
export function signInBoundHere(
  req: http.IncomingMessage,
  appState: string | undefined,
  secure: boolean,
): string | undefined {
  const m = /^([A-Za-z0-9_-]{12})\.([0-9a-f]{64})$/.exec(appState ?? '');
  if (m === null) return undefined;
  const [, id, hash] = m as unknown as [string, string, string];
  const nonce = cookieOf(req, SIGNIN_PREFIX + id);
  if (nonce === undefined || !/^[A-Za-z0-9_-]{43}$/.test(nonce)) return undefined;
  // Compared in constant time: how much of a guess matched must not show in the answer's timing.
  const match = crypto.timingSafeEqual(Buffer.from(sha256(nonce)), Buffer.from(hash));
  return match ? signInCookie(id, '', secure) : undefined;
}

export class WebSessions {
  readonly #db: Kysely<Database>;

  constructor(db: Kysely<Database>) {
    this.#db = db;
  }

  /** Starts a browser session for an account; returns the cookie's value. */
  async create(did: string, handle: string): Promise<string> {
    const cookie = crypto.randomBytes(32).toString('base64url');
    const now = Date.now();
    await this.#db
      .insertInto('web_sessions')
      .values({
        id_hash: sha256(cookie),
        did,
        handle,
        csrf: crypto.randomBytes(24).toString('base64url'),
        created_at: new Date(now).toISOString(),
        expires_at: new Date(now + SESSION_MS).toISOString(),
      })
      .execute();
    return cookie;
  }

  /** The reader a request's cookie belongs to, when it names a live session. */
  async viewer(req: http.IncomingMessage): Promise<Viewer | undefined> {
    const cookie = cookieOf(req, COOKIE);
    if (cookie === undefined || !/^[A-Za-z0-9_-]{43}$/.test(cookie)) return undefined;
    const row = await this.#db
      .selectFrom('web_sessions')
      .selectAll()
      .where('id_hash', '=', sha256(cookie))
      .executeTakeFirst();
    if (row === undefined || Date.parse(row.expires_at) < Date.now()) return undefined;
    return { did: row.did, handle: row.handle, csrf: row.csrf, idHash: row.id_hash };
  }

  /** Ends every browser session of an account (its tokens were revoked). */
  async endAll(did: string): Promise<void> {
    await this.#db.deleteFrom('web_sessions').where('did', '=', did).execute();
  }
}

/** True when the form's token is the session's: compared in constant time. */
export function csrfMatches(viewer: Viewer, sent: string | undefined): boolean {
  if (sent === undefined) return false;
  const a = Buffer.from(viewer.csrf);
  const b = Buffer.from(sent);
  return a.length === b.length && crypto.timingSafeEqual(a, b);
}
