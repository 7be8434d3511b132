import fs from 'node:fs';
import path from 'node:path';
import { isMissing, readJson, writeFileAtomic } from 'knotless-core/fsutil';
import type { Authorizer } from 'knotless-core/xrpc/client';

/**
 * Runs `fn` holding the lock on a session file, across processes: refresh tokens are single-use, so
 * whoever waited re-reads the file inside the lock and finds what the holder wrote instead of
 * spending a token again. proper-lockfile is loaded only here (most commands never refresh).
 */
export async function withSessionLock<T>(file: string, fn: () => Promise<T>, retries = 100): Promise<T> {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const { default: lockfile } = await import('proper-lockfile');
  const release = await lockfile.lock(file, {
    realpath: false,
    stale: 15_000,
    retries: { retries, minTimeout: 20, maxTimeout: 200 },
  });
  try {
    return await fn();
  } finally {
    await release();
  }
}

/** A session made with an app password. Tokens never leave this file except towards its PDS. */
export interface PasswordStoredSession {
  kind: 'password';
  did: string;
  handle: string;
  /** The PDS that issued the tokens. */
  pds: string;
  accessJwt: string;
  refreshJwt: string;
}

/**
 * A session made with OAuth (see oauth.ts): what @atproto/oauth-client-node saves (the token set and
 * the DPoP private key, as a JWK) under `oauth`, beside what knotless needs to rebuild the same client.
 */
export interface OAuthStoredSession {
  kind: 'oauth';
  did: string;
  handle: string;
  /** The PDS the tokens are for (the tokens' audience); they are never sent anywhere else. */
  pds: string;
  /** The loopback client_id used at login: refreshing must present the same one. */
  clientId: string;
  /** When the user granted it (ISO 8601); loopback clients' sessions end two weeks after at the latest. */
  createdAt: string;
  /** The library's saved session; absent once the library deleted it (revoked or expired). */
  oauth?: { tokenSet: { scope: string; expires_at?: string; aud: string }; [k: string]: unknown };
}

/** A session that authorizes requests, whichever way it was made. */
export interface SessionAuthorizer extends Authorizer {
  /** The account it acts as (did, verified handle, PDS) and how it was made. */
  readonly session: Pick<StoredSession, 'kind' | 'did' | 'handle' | 'pds'>;
  /** Ends the session at the PDS; a session already dead is not an error. */
  revoke(): Promise<void>;
}

/** A logged-in account as kept on disk. */
export type StoredSession = PasswordStoredSession | OAuthStoredSession;

/**
 * Sessions under the config directory: one file per account (DID), mode 0600, and a `current` file
 * naming the account commands act as.
 */
export class SessionStore {
  readonly dir: string;

  constructor(configDir: string) {
    this.dir = configDir;
  }

  /** The file holding one account's session. */
  fileFor(did: string): string {
    return path.join(this.dir, 'sessions', `${did.replaceAll(':', '_')}.json`);
  }

  /** The stored session of an account, if any. */
  get(did: string): StoredSession | undefined {
    return readJson<StoredSession>(this.fileFor(did));
  }

  /** Stores (replaces) an account's session. */
  put(session: StoredSession): void {
    writeFileAtomic(this.fileFor(session.did), JSON.stringify(session, null, 2));
  }

  /**
   * Records the handle an account's session goes by now (verified afresh both ways by the caller),
   * under the session's lock so that a refresh writing the file meanwhile is not undone.
   */
  async rename(did: string, handle: string): Promise<void> {
    await withSessionLock(this.fileFor(did), () => {
      const stored = this.get(did);
      if (stored !== undefined && stored.handle !== handle) this.put({ ...stored, handle });
      return Promise.resolve();
    });
  }

  /** Removes an account's session; the current account is cleared when it was this one. */
  remove(did: string): void {
    fs.rmSync(this.fileFor(did), { force: true });
    if (this.current() === did) fs.rmSync(path.join(this.dir, 'current'), { force: true });
  }

  /** The DID of the account commands act as. */
  current(): string | undefined {
    try {
      return fs.readFileSync(path.join(this.dir, 'current'), 'utf8').trim() || undefined;
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  /** Makes an account the current one. */
  setCurrent(did: string): void {
    writeFileAtomic(path.join(this.dir, 'current'), did + '\n');
  }

  /** Every stored session. */
  list(): StoredSession[] {
    let names: string[];
    try {
      names = fs.readdirSync(path.join(this.dir, 'sessions'));
    } catch (err) {
      if (isMissing(err)) return [];
      throw err;
    }
    return names
      .filter((n) => n.endsWith('.json'))
      .map((n) => readJson<StoredSession>(path.join(this.dir, 'sessions', n)))
      .filter((s): s is StoredSession => s !== undefined);
  }

  /** Finds a stored session by handle or DID. */
  find(actor: string): StoredSession | undefined {
    const a = actor.toLowerCase();
    return this.list().find((s) => s.did === actor || s.handle.toLowerCase() === a);
  }
}
