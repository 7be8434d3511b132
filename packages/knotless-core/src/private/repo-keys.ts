import { KnotlessError } from '../errors.ts';
import type { Identity } from '../identity/resolver.ts';
import { REPO_COLLECTION } from '../records/collections.ts';
import { safeText } from '../text/terminal.ts';
import { XrpcError, generalFailure, type XrpcClient } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import { RECIPIENT } from './device.ts';

/** One member of a private repository and the public keys of its devices the ring is wrapped to. */
export interface Member {
  did: string;
  keys: string[];
}

/** What a private repository's record says of it: the current key epoch, the members, the wrapped ring. */
export interface PrivateInfo {
  epoch: number;
  members: Member[];
  ring: Uint8Array;
}

/** The `private` field of a repository record, or undefined for a public one (or a malformed field). */
export function parsePrivate(value: unknown): PrivateInfo | undefined {
  const v = (value as { private?: unknown } | null)?.private as Record<string, unknown> | undefined;
  if (typeof v !== 'object' || v === null) return undefined;
  const ring = (v['ring'] as { $bytes?: unknown } | undefined)?.$bytes;
  const members = v['members'];
  if (!Number.isSafeInteger(v['epoch']) || typeof ring !== 'string' || !Array.isArray(members))
    return undefined;
  const list: Member[] = [];
  for (const m of members) {
    const mm = m as { did?: unknown; keys?: unknown } | null;
    if (typeof mm?.did !== 'string' || !Array.isArray(mm.keys)) continue;
    list.push({
      did: mm.did,
      keys: mm.keys.filter((k): k is string => typeof k === 'string' && RECIPIENT.test(k)),
    });
  }
  return { epoch: v['epoch'] as number, members: list, ring: Buffer.from(ring, 'base64') };
}

export function writePrivate(info: PrivateInfo): Record<string, unknown> {
  return {
    epoch: info.epoch,
    members: info.members.map((m) => ({ did: m.did, keys: m.keys })),
    ring: { $bytes: Buffer.from(info.ring).toString('base64') },
  };
}

/** A repository record as read for a compare-and-swap: its value and CID. */
export interface RepoRecordRead {
  cid: string;
  value: Record<string, unknown>;
}

export async function readRepoRecord(
  reader: XrpcClient,
  owner: Identity,
  name: string,
): Promise<RepoRecordRead> {
  try {
    const res = await reader.query<{ cid: string; value: Record<string, unknown> }>(
      'com.atproto.repo.getRecord',
      {
        repo: owner.did,
        collection: REPO_COLLECTION,
        rkey: name,
      },
    );
    return { cid: res.cid, value: res.value };
  } catch (err) {
    const label = `${safeText(owner.handle ?? owner.did)}/${safeText(name)}`;
    if (err instanceof XrpcError && pdsRefusal(err) === 'record-missing')
      throw new KnotlessError(
        'repo-missing',
        `${label} does not exist; check the name with \`knotless repo list\`.`,
        {
          cause: err,
        },
      );
    throw generalFailure(err, `reading ${label}`);
  }
}

/** Writes the repository record if it is still at `cid`; false when it moved (read it again). */
export async function swapRepoRecord(
  writer: XrpcClient,
  did: string,
  name: string,
  value: Record<string, unknown>,
  cid: string,
): Promise<boolean> {
  try {
    await writer.procedure('com.atproto.repo.putRecord', {
      repo: did,
      collection: REPO_COLLECTION,
      rkey: name,
      record: { ...value, $type: REPO_COLLECTION },
      swapRecord: cid,
    });
    return true;
  } catch (err) {
    if (err instanceof XrpcError && pdsRefusal(err) === 'swap-conflict') return false;
    throw generalFailure(err, `writing ${name}`);
  }
}
