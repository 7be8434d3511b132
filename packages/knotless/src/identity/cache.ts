import path from 'node:path';
import { readJson, writeFileAtomic } from '../fsutil.ts';

/** What the cache remembers of one identity. */
export interface CachedIdentity {
  did: string;
  handle: string | undefined;
  pds: string;
}

interface Entry<T> {
  value: T;
  at: number;
}

interface CacheFile {
  handles: Record<string, Entry<string>>;
  dids: Record<string, Entry<CachedIdentity>>;
}

/**
 * Handle → DID and DID → identity resolutions on disk with a time to live, so that an ordinary push
 * or fetch spends no request on identity. One small JSON file: few accounts are ever in it.
 */
export class IdentityCache {
  readonly #file: string;
  readonly #ttlMs: number;

  constructor(cacheDir: string, ttlSeconds: number) {
    this.#file = path.join(cacheDir, 'identity.json');
    this.#ttlMs = ttlSeconds * 1000;
  }

  #read(): CacheFile {
    const data = readJson<CacheFile>(this.#file);
    return { handles: data?.handles ?? {}, dids: data?.dids ?? {} };
  }

  #fresh<T>(entry: Entry<T> | undefined): T | undefined {
    return entry !== undefined && Date.now() - entry.at < this.#ttlMs ? entry.value : undefined;
  }

  /** The DID a handle resolved to, while fresh. */
  handle(handle: string): string | undefined {
    return this.#fresh(this.#read().handles[handle.toLowerCase()]);
  }

  /** The identity of a DID, while fresh. */
  did(did: string): CachedIdentity | undefined {
    return this.#fresh(this.#read().dids[did]);
  }

  /** Remembers an identity (and its handle's resolution when it has one). */
  put(identity: CachedIdentity): void {
    const data = this.#read();
    const at = Date.now();
    data.dids[identity.did] = { value: identity, at };
    if (identity.handle !== undefined)
      data.handles[identity.handle.toLowerCase()] = { value: identity.did, at };
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
