import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KnotlessError } from '../errors.ts';
import { isMissing, writeFileAtomic } from '../fsutil.ts';
import { age } from './libs.ts';

/** This machine's key: an age X25519 identity and its recipient (the public key). */
export interface DeviceKey {
  identity: string;
  recipient: string;
  fingerprint: string;
}

const IDENTITY = /^AGE-SECRET-KEY-1[0-9A-Z]{58}$/;
export const RECIPIENT = /^age1[0-9a-z]{58}$/;

/** The device key's file: 0600 in the config folder, never uploaded in the clear. */
export function deviceKeyFile(configDir: string): string {
  return path.join(configDir, 'keys', 'device.key');
}

/** A public key's fingerprint: the first 64 bits of its SHA-256, in four groups (`1a2b 3c4d …`). */
export function fingerprint(recipient: string): string {
  const hex = crypto.createHash('sha256').update(recipient, 'utf8').digest('hex').slice(0, 16);
  return hex.match(/.{4}/g)!.join(' ');
}

/** The record key of a public key's `dev.knotless.key` record: its fingerprint, without spaces. */
export function keyRecordKey(recipient: string): string {
  return fingerprint(recipient).replaceAll(' ', '');
}

async function fromIdentity(identity: string): Promise<DeviceKey> {
  const recipient = await (await age()).identityToRecipient(identity);
  return { identity, recipient, fingerprint: fingerprint(recipient) };
}

/** This machine's key, or undefined when it has none yet. */
export async function loadDeviceKey(configDir: string): Promise<DeviceKey | undefined> {
  let text: string;
  try {
    text = fs.readFileSync(deviceKeyFile(configDir), 'utf8').trim();
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
  if (!IDENTITY.test(text))
    throw new KnotlessError(
      'usage',
      `${deviceKeyFile(configDir)} is not a knotless device key; move it away and run \`knotless key list\` to make a new one.`,
    );
  return fromIdentity(text);
}

/** This machine's key, made on first use. */
export async function ensureDeviceKey(configDir: string): Promise<{ key: DeviceKey; made: boolean }> {
  const have = await loadDeviceKey(configDir);
  if (have !== undefined) return { key: have, made: false };
  const identity = await (await age()).generateX25519Identity();
  storeDeviceKey(configDir, identity);
  return { key: await fromIdentity(identity), made: true };
}

function storeDeviceKey(configDir: string, identity: string): void {
  fs.mkdirSync(path.join(configDir, 'keys'), { recursive: true, mode: 0o700 });
  writeFileAtomic(deviceKeyFile(configDir), `${identity}\n`, 0o600);
}

/** The device key encrypted with a passphrase (age, scrypt), armored: for `knotless key export`. */
export async function exportDeviceKey(key: DeviceKey, passphrase: string): Promise<string> {
  const { Encrypter, armor } = await age();
  const e = new Encrypter();
  e.setPassphrase(passphrase);
  return armor.encode(await e.encrypt(key.identity));
}

/**
 * Opens what {@link exportDeviceKey} wrote and makes it this machine's key. Refuses to replace a
 * different key already here (its repositories would become unreadable to this machine).
 */
export async function importDeviceKey(
  configDir: string,
  armored: string,
  passphrase: string,
  replace: boolean,
): Promise<DeviceKey> {
  const { Decrypter, armor } = await age();
  const d = new Decrypter();
  d.addPassphrase(passphrase);
  let identity: string;
  try {
    identity = (await d.decrypt(armor.decode(armored), 'text')).trim();
  } catch {
    throw new KnotlessError(
      'wrong-password',
      'The key file does not open with that passphrase (or is not a knotless key export); check both and try again.',
    );
  }
  if (!IDENTITY.test(identity))
    throw new KnotlessError(
      'usage',
      'The file holds no knotless device key; export it again with `knotless key export`.',
    );
  const have = await loadDeviceKey(configDir);
  if (have !== undefined && have.identity !== identity && !replace)
    throw new KnotlessError(
      'usage',
      `This machine already has a different key (${have.fingerprint}); pass --replace to use the imported one instead.`,
    );
  storeDeviceKey(configDir, identity);
  return fromIdentity(identity);
}

/** A label for this machine's key record: the host name, as the user named the machine. */
export function deviceLabel(): string {
  return os.hostname().slice(0, 64);
}
