import fs from 'node:fs';
import { KnotlessError } from '../errors.ts';
import { PackFile, tempFile } from '../git/pack-file.ts';
import { sodium } from './libs.ts';

/**
 * Plain bytes per secretstream message. Each message costs 17 bytes and one call into libsodium;
 * 256 KiB keeps both negligible while memory stays a few buffers whatever the pack's size.
 */
const CHUNK = 256 * 1024;
const HEADER = 24;
const ABYTES = 17;

/** The size a pack of `plain` bytes has once encrypted. */
export function sealedPackSize(plain: number): number {
  return HEADER + plain + Math.max(1, Math.ceil(plain / CHUNK)) * ABYTES;
}

/**
 * Encrypts a pack with libsodium's secretstream (XChaCha20-Poly1305, a final tag on the last
 * message, so a truncated stream is refused) into a new temporary file, read and written a chunk at
 * a time. The caller closes both files.
 */
export async function encryptPack(pack: PackFile, key: Uint8Array, dir: string): Promise<PackFile> {
  const s = await sodium();
  const out = tempFile(dir, 'sealed');
  try {
    const { state, header } = s.crypto_secretstream_xchacha20poly1305_init_push(key);
    let at = 0;
    const write = (bytes: Uint8Array) => {
      fs.writeSync(out.fd, bytes, 0, bytes.length, at);
      at += bytes.length;
    };
    write(header);
    const buf = Buffer.allocUnsafe(CHUNK);
    let off = 0;
    do {
      const piece = pack.readInto(buf.subarray(0, Math.min(CHUNK, pack.length - off)), off);
      off += piece.length;
      const tag =
        off >= pack.length
          ? s.crypto_secretstream_xchacha20poly1305_TAG_FINAL
          : s.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE;
      write(s.crypto_secretstream_xchacha20poly1305_push(state, piece, null, tag));
    } while (off < pack.length);
    return PackFile.fromFds([{ fd: out.fd, size: at }], [out.path]);
  } catch (err) {
    fs.closeSync(out.fd);
    fs.rmSync(out.path, { force: true });
    throw err;
  }
}

function damaged(id: string): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `Pack ${id} of the private repository does not decrypt (it was changed or cut short on the PDS); nothing was written.`,
  );
}

/**
 * Decrypts what {@link encryptPack} made into a new temporary file, a chunk at a time; any change,
 * reordering or truncation is refused. The caller closes both files.
 */
export async function decryptPack(
  sealed: PackFile,
  key: Uint8Array,
  dir: string,
  id: string,
): Promise<PackFile> {
  const s = await sodium();
  if (sealed.length < HEADER + ABYTES) throw damaged(id);
  const out = tempFile(dir, 'opened');
  try {
    const state = s.crypto_secretstream_xchacha20poly1305_init_pull(sealed.read(0, HEADER), key);
    const buf = Buffer.allocUnsafe(CHUNK + ABYTES);
    let off = HEADER;
    let at = 0;
    let final = false;
    while (off < sealed.length) {
      if (final) throw damaged(id);
      const piece = sealed.readInto(buf.subarray(0, Math.min(CHUNK + ABYTES, sealed.length - off)), off);
      off += piece.length;
      const res = s.crypto_secretstream_xchacha20poly1305_pull(state, piece, null);
      if (res === false) throw damaged(id);
      final = res.tag === s.crypto_secretstream_xchacha20poly1305_TAG_FINAL;
      fs.writeSync(out.fd, res.message, 0, res.message.length, at);
      at += res.message.length;
    }
    if (!final) throw damaged(id);
    return PackFile.fromFds([{ fd: out.fd, size: at }], [out.path]);
  } catch (err) {
    fs.closeSync(out.fd);
    fs.rmSync(out.path, { force: true });
    throw err;
  }
}
