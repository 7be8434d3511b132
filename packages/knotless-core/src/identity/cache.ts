import path from 'node:path';
import { readJson, writeFileAtomic } from '../fsutil.ts';

/** What the cache remembers of one identity. */
export interface CachedIdentity {
  did: string;
  /** The handle, only when verified both ways (it resolves to `did` and `did`'s document claims it). */
  handle: string | undefined;
  pds: string;
}

interface Entry<T> {
  value: T;
  at: number;
}

/**
 * Version 2 holds only bidirectionally verified handles. Files without it were written by code that
 * trusted the handle a DID document claims, so one may map a handle to an impostor's DID: such a
 * file is read as empty, and the next write replaces it.
 */
const VERSION = 2;

interface CacheFile {
  version: typeof VERSION;
  handles: Record<string, Entry<string>>;
  dids: Record<string, Entry<CachedIdentity>>;
}

/**
 * Handle → DID and DID → identity resolutions on disk with a time to live, so that an ordinary push
 * or fetch spends no request on identity. One small JSON file: few accounts are ever in it.
 * Only verified pairs go in: a handle entry is written only together with a DID entry naming that
 * same handle, and a handle is trusted only while both agree.
 */
export class IdentityCache {
  readonly #file: string;
  readonly #ttlMs: number;

  constructor(cacheDir: string, ttlSeconds: number) {
    this.#file = path.join(cacheDir, 'identity.json');
    this.#ttlMs = ttlSeconds * 1000;
  }

  #read(): CacheFile {
    const data = readJson<Partial<CacheFile>>(this.#file);
    if (data?.version !== VERSION) return { version: VERSION, handles: {}, dids: {} };
    return { version: VERSION, handles: data.handles ?? {}, dids: data.dids ?? {} };
  }

  #fresh<T>(entry: Entry<T> | undefined): T | undefined {
    return entry !== undefined && Date.now() - entry.at < this.#ttlMs ? entry.value : undefined;
  }

  /** The verified identity a handle belongs to, while fresh. */
  handle(handle: string): CachedIdentity | undefined {
    const data = this.#read();
    const h = handle.toLowerCase();
    const did = this.#fresh(data.handles[h]);
    const identity = did === undefined ? undefined : this.#fresh(data.dids[did]);
    // Both directions must still agree; a DID entry re-resolved without this handle voids the pair.
    return identity?.handle?.toLowerCase() === h ? identity : undefined;
  }

  /** The identity of a DID, while fresh. */
  did(did: string): CachedIdentity | undefined {
    return this.#fresh(this.#read().dids[did]);
  }

  /**
   * Remembers an identity. Its handle must have been verified both ways by the caller; an identity
   * without one is remembered by DID only, so nothing about an unverified handle is ever stored.
   */
  put(identity: CachedIdentity): void {
    const data = this.#read();
    const at = Date.now();
    const handle = identity.handle?.toLowerCase();
    data.dids[identity.did] = { value: identity, at };
    if (handle !== undefined) {
      // A handle belongs to one DID: a DID that held it before (the handle moved) loses it here.
      for (const [did, entry] of Object.entries(data.dids)) {
        if (did !== identity.did && entry.value.handle?.toLowerCase() === handle) {
          entry.value = { ...entry.value, handle: undefined };
        }
      }
      data.handles[handle] = { value: identity.did, at };
    }
    writeFileAtomic(this.#file, JSON.stringify(data));
  }

  /** Forgets an identity, e.g. after its PDS stopped answering for it. */
  forget(didOrHandle: string): void {
    const data = this.#read();
    const did = didOrHandle.startsWith('did:') ? didOrHandle : data.handles[didOrHandle.toLowerCase()]?.value;
    delete data.handles[didOrHandle.toLowerCase()];
    if (did !== undefined) {
      const handle = data.dids[did]?.value.handle;
      if (handle !== undefined) delete data.handles[handle.toLowerCase()];
      delete data.dids[did];
    }
    writeFileAtomic(this.#file, JSON.stringify(data));
  }
}
