/**
 * The cryptographic libraries private repositories use, each loaded on first use only, so that a
 * public repository's push, fetch and clone never load them, and a private one loads only what it
 * needs:
 *
 * - libsodium (`libsodium-wrappers`): packs, encrypted with its streaming AEAD
 *   (`crypto_secretstream_xchacha20poly1305`). Measured against age's own stream (pure JavaScript)
 *   on this machine: about three times faster, which keeps a large push or a clone near a plain
 *   one's time. Its WebAssembly costs some 10 ms of CPU to load, so only a push that stores a pack
 *   as blobs, or a fetch or clone that downloads one, loads it.
 * - `@noble/ciphers` (audited; the ciphers age-encryption itself is built on): ref records, with
 *   its XChaCha20-Poly1305, the very AEAD libsodium calls `crypto_aead_xchacha20poly1305_ietf`
 *   (same bytes: a record sealed by one opens with the other). Plain JavaScript, loaded in a
 *   millisecond or two: a listing and a small push (its pack inline in the record) never wait for
 *   libsodium.
 * - age (`age-encryption`): keys. A device key is an age X25519 identity, a repository's key ring is
 *   an age file encrypted to every member device's X25519 recipient, and an exported device key is
 *   an age file encrypted with a passphrase (scrypt). Small data, a standard format a user can open
 *   with the `age` tool too. Loaded only when a ring is opened or wrapped (this machine keeps the
 *   rings it opened, see ring.ts).
 */
import type SodiumLib from 'libsodium-wrappers';
import type * as AgeLib from 'age-encryption';
import type * as ChachaLib from '@noble/ciphers/chacha.js';

type Sodium = typeof SodiumLib;
type Age = typeof AgeLib;
type Chacha = typeof ChachaLib;

let sodiumReady: Promise<Sodium> | undefined;
let ageLoaded: Promise<Age> | undefined;
let chachaLoaded: Promise<Chacha> | undefined;

export function sodium(): Promise<Sodium> {
  return (sodiumReady ??= import('libsodium-wrappers').then(async (m) => {
    // Bundled as CommonJS, the module is the library itself; as ESM, its default export.
    const lib: Sodium = m.default ?? m;
    await lib.ready;
    return lib;
  }));
}

/**
 * Starts loading libsodium without waiting for it, when a pack will surely need it soon (a listing
 * showed sealed packs): its WebAssembly then compiles while the blobs download. A failure is left
 * for {@link sodium}'s caller to meet.
 */
export function preloadSodium(): void {
  sodium().catch(() => undefined);
}

export function age(): Promise<Age> {
  return (ageLoaded ??= import('age-encryption'));
}

export function chacha(): Promise<Chacha> {
  return (chachaLoaded ??= import('@noble/ciphers/chacha.js'));
}
