import type { Identity } from '../identity/resolver.ts';
import type { XrpcClient } from '../xrpc/client.ts';
import { openRing } from './open.ts';
import { parsePrivate, readRepoRecord, writePrivate } from './repo-keys.ts';
import { wrapRing } from './ring.ts';
import type { KeyRing } from './sealer.ts';

/**
 * The `private` field of a fork of a private repository: private to the same members, with the same
 * key ring (so the original's encrypted blobs are copied as they are and stay readable), wrapped
 * anew for the fork's record. Undefined when the original is public; throws `no-key` when this
 * machine cannot open it.
 */
export async function forkPrivate(
  configDir: string,
  reader: XrpcClient,
  source: Identity,
  name: string,
): Promise<{ field: Record<string, unknown>; ring: KeyRing } | undefined> {
  const info = parsePrivate((await readRepoRecord(reader, source, name)).value);
  if (info === undefined) return undefined;
  const ring = (await openRing(configDir, reader, source, name))!;
  const keys = info.members.flatMap((m) => m.keys);
  return { field: writePrivate({ ...info, ring: await wrapRing(ring, keys) }), ring };
}
