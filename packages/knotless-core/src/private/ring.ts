import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { isMissing, writeFileAtomic } from '../fsutil.ts';
import type { KeyRing } from './sealer.ts';
import { age } from './libs.ts';

/** A fresh key ring: one random 32-byte key, epoch 0. */
export function newRing(): KeyRing {
  return { epochs: [crypto.randomBytes(32)] };
}

/** The ring with a new current key appended (unshare): earlier packs stay readable to the members. */
export function rotateRing(ring: KeyRing): KeyRing {
  return { epochs: [...ring.epochs, crypto.randomBytes(32)] };
}

function toJson(ring: KeyRing): string {
  return JSON.stringify({ epochs: ring.epochs.map((k) => Buffer.from(k).toString('base64')) });
}

function fromJson(text: string): KeyRing | undefined {
  const v = JSON.parse(text) as { epochs?: unknown };
  if (!Array.isArray(v.epochs) || v.epochs.length === 0) return undefined;
  const epochs = v.epochs.map((k) => (typeof k === 'string' ? Buffer.from(k, 'base64') : Buffer.alloc(0)));
  return epochs.every((k) => k.length === 32) ? { epochs } : undefined;
}

/** The ring encrypted (age) to every recipient (`age1…`): one file, one stanza per member device. */
export async function wrapRing(ring: KeyRing, recipients: string[]): Promise<Uint8Array> {
  const { Encrypter } = await age();
  const e = new Encrypter();
  for (const r of recipients) e.addRecipient(r);
  return e.encrypt(toJson(ring));
}

/** The ring opened with a device identity (`AGE-SECRET-KEY-1…`); undefined when it is not for it. */
export async function unwrapRing(bytes: Uint8Array, identity: string): Promise<KeyRing | undefined> {
  const { Decrypter } = await age();
  const d = new Decrypter();
  d.addIdentity(identity);
  try {
    return fromJson(await d.decrypt(bytes, 'text'));
  } catch {
    return undefined;
  }
}

/**
 * Where this machine keeps the rings it opened (0600, in the config folder beside the device key):
 * a push then needs no extra request, and a repository once known private is never written to in
 * the clear, whatever a PDS later says of it.
 */
function ringFile(configDir: string, did: string, name: string): string {
  return path.join(configDir, 'keys', 'repos', encodeURIComponent(did), `${name}.json`);
}

export function readCachedRing(configDir: string, did: string, name: string): KeyRing | undefined {
  try {
    return fromJson(fs.readFileSync(ringFile(configDir, did, name), 'utf8'));
  } catch (err) {
    if (isMissing(err)) return undefined;
    throw err;
  }
}

/** True when this machine has opened the repository before: it is private, whatever is listed. */
export function knownPrivate(configDir: string, did: string, name: string): boolean {
  return fs.existsSync(ringFile(configDir, did, name));
}

export function cacheRing(configDir: string, did: string, name: string, ring: KeyRing): void {
  const file = ringFile(configDir, did, name);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  writeFileAtomic(file, toJson(ring), 0o600);
}

/** Forgets a ring (the repository was deleted). */
export function forgetRing(configDir: string, did: string, name: string): void {
  fs.rmSync(ringFile(configDir, did, name), { force: true });
}
