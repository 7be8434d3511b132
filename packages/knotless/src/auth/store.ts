import fs from 'node:fs';
import path from 'node:path';
import { isMissing, readJson, writeFileAtomic } from '../fsutil.ts';

/** A logged-in account as kept on disk. Tokens never leave this file except towards its PDS. */
export interface StoredSession {
  kind: 'password';
  did: string;
  handle: string;
  /** The PDS that issued the tokens. */
  pds: string;
  accessJwt: string;
  refreshJwt: string;
}

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
