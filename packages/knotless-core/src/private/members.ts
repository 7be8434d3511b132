import { KnotlessError } from '../errors.ts';
import type { Identity } from '../identity/resolver.ts';
import { safeText } from '../text/terminal.ts';
import type { XrpcClient } from '../xrpc/client.ts';
import { ensureDeviceKey, loadDeviceKey, type DeviceKey } from './device.ts';
import { listKeys, publishKey, type PublishedKey } from './key-records.ts';
import { noKey } from './open.ts';
import {
  parsePrivate,
  readRepoRecord,
  swapRepoRecord,
  writePrivate,
  type Member,
  type PrivateInfo,
} from './repo-keys.ts';
import { cacheRing, newRing, rotateRing, unwrapRing, wrapRing } from './ring.ts';
import type { KeyRing } from './sealer.ts';

/** What the membership commands work with: the owner's account and clients. */
export interface MembersEnv {
  configDir: string;
  owner: Identity;
  /** Reads the owner's PDS. */
  reader: XrpcClient;
  /** Writes to the owner's PDS as the owner. */
  writer: XrpcClient;
  /** Reads another account's PDS (a member's published keys). */
  readerFor(pds: string): XrpcClient;
}

/** This machine's key, made on first use and published in the account (idempotent). */
export async function deviceKeyPublished(
  env: Pick<MembersEnv, 'configDir' | 'owner' | 'reader' | 'writer'>,
): Promise<DeviceKey> {
  const { key } = await ensureDeviceKey(env.configDir);
  const published = await listKeys(env.reader, env.owner.did);
  if (!published.some((k) => k.recipient === key.recipient)) await publishKey(env.writer, env.owner.did, key);
  return key;
}

/**
 * The `private` field of a new private repository: a fresh ring wrapped to every key the owner has
 * published (this machine's first, published if it was not), cached on this machine.
 */
export async function newPrivate(
  env: MembersEnv,
): Promise<{ field: Record<string, unknown>; ring: KeyRing }> {
  const device = await deviceKeyPublished(env);
  const keys = (await listKeys(env.reader, env.owner.did)).map((k) => k.recipient);
  if (!keys.includes(device.recipient)) keys.unshift(device.recipient);
  const ring = newRing();
  const info: PrivateInfo = {
    epoch: 0,
    members: [{ did: env.owner.did, keys }],
    ring: await wrapRing(ring, keys),
  };
  return { field: writePrivate(info), ring };
}

function notPrivate(label: string): KnotlessError {
  return new KnotlessError('usage', `${label} is not private; only a private repository has members.`);
}

/**
 * Changes a private repository's members with a compare-and-swap on its record, read again and
 * redone when another change landed first (at most 5 times). `change` gets the members and the
 * opened ring and returns the new ones.
 */
async function changeMembers(
  env: MembersEnv,
  name: string,
  change: (members: Member[], ring: KeyRing) => Promise<{ members: Member[]; ring: KeyRing }>,
): Promise<{ info: PrivateInfo; ring: KeyRing }> {
  const label = `${safeText(env.owner.handle ?? env.owner.did)}/${safeText(name)}`;
  const device = await loadDeviceKey(env.configDir);
  for (let attempt = 0; attempt < 5; attempt++) {
    const read = await readRepoRecord(env.reader, env.owner, name);
    const info = parsePrivate(read.value);
    if (info === undefined) throw notPrivate(label);
    const ring = device === undefined ? undefined : await unwrapRing(info.ring, device.identity);
    if (ring === undefined) throw noKey(env.owner, name);
    const next = await change(info.members, ring);
    const wrapped: PrivateInfo = {
      epoch: next.ring.epochs.length - 1,
      members: next.members,
      ring: await wrapRing(
        next.ring,
        next.members.flatMap((m) => m.keys),
      ),
    };
    if (
      await swapRepoRecord(
        env.writer,
        env.owner.did,
        name,
        { ...read.value, private: writePrivate(wrapped) },
        read.cid,
      )
    ) {
      cacheRing(env.configDir, env.owner.did, name, next.ring);
      return { info: wrapped, ring: next.ring };
    }
  }
  throw new KnotlessError(
    'remote-changed',
    `${label} kept changing while its members were changed; try again.`,
  );
}

/** Adds a member (all its published keys): the same ring, wrapped to one more account's devices. */
export async function share(env: MembersEnv, name: string, member: Identity): Promise<PublishedKey[]> {
  const keys = await listKeys(env.readerFor(member.pds), member.did);
  const who = safeText(member.handle ?? member.did);
  if (keys.length === 0)
    throw new KnotlessError(
      'not-found',
      `${who} has published no knotless key; ask them to run \`knotless key list\` once (it makes and publishes one), then share again.`,
    );
  await changeMembers(env, name, (members, ring) =>
    Promise.resolve({
      members: [
        ...members.filter((m) => m.did !== member.did),
        { did: member.did, keys: keys.map((k) => k.recipient) },
      ],
      ring,
    }),
  );
  return keys;
}

/**
 * Removes a member and rotates the key: a new epoch key, wrapped with the earlier ones to the members
 * who remain. What is sealed from now on uses the new key; the removed member keeps only what it
 * could already read.
 */
export async function unshare(env: MembersEnv, name: string, member: Identity): Promise<number> {
  const who = safeText(member.handle ?? member.did);
  if (member.did === env.owner.did)
    throw new KnotlessError(
      'usage',
      'The owner cannot be removed from its own repository; delete it instead.',
    );
  const { info } = await changeMembers(env, name, (members, ring) => {
    if (!members.some((m) => m.did === member.did))
      throw new KnotlessError(
        'usage',
        `${who} is not a member of ${safeText(name)}; \`knotless repo info\` lists them.`,
      );
    return Promise.resolve({ members: members.filter((m) => m.did !== member.did), ring: rotateRing(ring) });
  });
  return info.epoch;
}
