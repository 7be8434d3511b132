import { KnotlessError } from '../errors.ts';
import type { Identity } from '../identity/resolver.ts';
import type { PrivacyOpener, RefSealer } from '../records/sealer.ts';
import { safeText } from '../text/terminal.ts';
import type { XrpcClient } from '../xrpc/client.ts';
import { loadDeviceKey } from './device.ts';
import { parsePrivate, readRepoRecord } from './repo-keys.ts';
import { cacheRing, knownPrivate, readCachedRing, unwrapRing } from './ring.ts';
import { RepoSealer, type KeyRing } from './sealer.ts';

/** The one sentence for a private repository this machine cannot open. */
export function noKey(owner: Identity, name: string): KnotlessError {
  return new KnotlessError(
    'no-key',
    `${safeText(owner.handle ?? owner.did)}/${safeText(name)} is private, and this machine holds no key that opens it; ask its owner to share it with you (\`knotless repo share\`), or import your key with \`knotless key import\`.`,
  );
}

/**
 * Opens a private repository's ring with this machine's device key, from the repository record;
 * caches it. Undefined when the repository is public.
 */
export async function openRing(
  configDir: string,
  reader: XrpcClient,
  owner: Identity,
  name: string,
): Promise<KeyRing | undefined> {
  const info = parsePrivate((await readRepoRecord(reader, owner, name)).value);
  if (info === undefined) {
    if (knownPrivate(configDir, owner.did, name))
      throw new KnotlessError(
        'corrupt-remote',
        `${safeText(owner.handle ?? owner.did)}/${safeText(name)} was private, and its PDS now says it is not; nothing was read or written.`,
      );
    return undefined;
  }
  const device = await loadDeviceKey(configDir);
  const ring = device === undefined ? undefined : await unwrapRing(info.ring, device.identity);
  if (ring === undefined || ring.epochs.length !== info.epoch + 1) throw noKey(owner, name);
  cacheRing(configDir, owner.did, name, ring);
  return ring;
}

/**
 * The privacy opener a front end hands a RemoteRepo: the cached ring when this machine opened the
 * repository before and the ring knows every epoch listed; otherwise the repository record, read
 * only when a listing showed sealed records or nothing at all (a plain listing of a repository this
 * machine never opened is public: no request).
 */
export function privacyOpener(
  configDir: string,
  reader: XrpcClient,
  owner: Identity,
  name: string,
): PrivacyOpener {
  return async (seen, epoch = 0): Promise<RefSealer | undefined> => {
    const cached = readCachedRing(configDir, owner.did, name);
    if (cached === undefined && seen === 'plain') return undefined;
    const ring =
      cached !== undefined && cached.epochs.length > epoch
        ? cached
        : await openRing(configDir, reader, owner, name);
    return ring === undefined ? undefined : RepoSealer.create(owner.did, name, ring);
  };
}
