import { KEY_COLLECTION } from '../records/collections.ts';
import { listRecords, rkeyOf } from '../records/list-records.ts';
import { generalFailure, type XrpcClient } from '../xrpc/client.ts';
import { RECIPIENT, deviceLabel, fingerprint, keyRecordKey, type DeviceKey } from './device.ts';

/** A device's public key as published in its owner's account (`dev.knotless.key`). */
export interface PublishedKey {
  recipient: string;
  fingerprint: string;
  label: string;
  createdAt: string;
}

/**
 * Every valid key record of an account. A record whose key is not its public key's fingerprint is
 * left out: the key names the public key, so one record cannot pose as another device's.
 */
export async function listKeys(reader: XrpcClient, did: string): Promise<PublishedKey[]> {
  const out: PublishedKey[] = [];
  try {
    for await (const r of listRecords(reader, did, KEY_COLLECTION)) {
      const v = (typeof r.value === 'object' && r.value !== null ? r.value : {}) as Record<string, unknown>;
      const recipient = v['publicKey'];
      if (typeof recipient !== 'string' || !RECIPIENT.test(recipient)) continue;
      if (rkeyOf(r.uri) !== keyRecordKey(recipient)) continue;
      out.push({
        recipient,
        fingerprint: fingerprint(recipient),
        label: typeof v['label'] === 'string' ? v['label'].slice(0, 64) : '',
        createdAt: typeof v['createdAt'] === 'string' ? v['createdAt'] : '',
      });
    }
  } catch (err) {
    throw generalFailure(err, `listing the keys of ${did}`);
  }
  return out;
}

/** Publishes this machine's public key in the account (idempotent: the record key is its fingerprint). */
export async function publishKey(writer: XrpcClient, did: string, key: DeviceKey): Promise<void> {
  try {
    await writer.procedure('com.atproto.repo.putRecord', {
      repo: did,
      collection: KEY_COLLECTION,
      rkey: keyRecordKey(key.recipient),
      record: {
        $type: KEY_COLLECTION,
        publicKey: key.recipient,
        label: deviceLabel(),
        createdAt: new Date().toISOString(),
      },
    });
  } catch (err) {
    throw generalFailure(err, 'publishing this machine’s key');
  }
}
