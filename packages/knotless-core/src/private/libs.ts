/**
 * The two cryptographic libraries private repositories use, loaded on first use only, so that a
 * public repository's push, fetch and clone never load them:
 *
 * - libsodium (`libsodium-wrappers`): the bulk of the data. Packs are encrypted with its streaming
 *   AEAD (`crypto_secretstream_xchacha20poly1305`), ref records with its XChaCha20-Poly1305 AEAD.
 *   Measured against age's own stream (pure JavaScript) on this machine: about three times faster,
 *   which is what keeps a private clone near a plain one's time.
 * - age (`age-encryption`): keys. A device key is an age X25519 identity, a repository's key ring is
 *   an age file encrypted to every member device's X25519 recipient, and an exported device key is
 *   an age file encrypted with a passphrase (scrypt). Small data, a standard format a user can open
 *   with the `age` tool too.
 */
import type SodiumLib from 'libsodium-wrappers';
import type * as AgeLib from 'age-encryption';

type Sodium = typeof SodiumLib;
type Age = typeof AgeLib;

let sodiumReady: Promise<Sodium> | undefined;
let ageLoaded: Promise<Age> | undefined;

export function sodium(): Promise<Sodium> {
  return (sodiumReady ??= import('libsodium-wrappers').then(async (m) => {
    // Bundled as CommonJS, the module is the library itself; as ESM, its default export.
    const lib: Sodium = m.default ?? m;
    await lib.ready;
    return lib;
  }));
}

export function age(): Promise<Age> {
  return (ageLoaded ??= import('age-encryption'));
}
