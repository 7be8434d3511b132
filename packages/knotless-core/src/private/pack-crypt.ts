import fs from 'node:fs';
import { KnotlessError } from '../errors.ts';
import { PackFile, tempFile } from '../git/pack-file.ts';
import { sodium } from './libs.ts';

type Sodium = Awaited<ReturnType<typeof sodium>>;

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
 * libsodium's own secretstream functions, called on buffers of its memory that live as long as one
 * pack, rather than through libsodium-wrappers' `push` and `pull`, which allocate a new array for
 * every piece they return: those wait for V8 to collect them, and a 128 MiB pack's encryption then
 * peaked 47 MiB higher than an 8 MiB one's. The wrappers still make the state (`init_push`,
 * `init_pull`); these are the calls they make themselves, with the same arguments (64-bit lengths as
 * two 32-bit halves, as this build of libsodium takes them: checked, so that another build fails
 * loudly here rather than misreading a length).
 */
interface RawSodium {
  HEAPU8: Uint8Array;
  _malloc(size: number): number;
  _free(ptr: number): void;
  _crypto_secretstream_xchacha20poly1305_push(
    ...args: [number, number, number, number, number, number, number, number, number, number]
  ): number;
  _crypto_secretstream_xchacha20poly1305_pull(
    ...args: [number, number, number, number, number, number, number, number, number, number]
  ): number;
}

/** A secretstream state's address in libsodium's memory (a number, whatever its typings say). */
function address(state: unknown): number {
  const a = typeof state === 'number' ? state : (state as { address?: unknown } | null)?.address;
  if (typeof a !== 'number') throw new Error('libsodium returned a secretstream state knotless cannot use');
  return a;
}

/** Input, output and tag buffers in libsodium's memory, for pieces of up to `size` bytes. */
class Pieces {
  readonly raw: RawSodium;
  readonly in: number;
  readonly out: number;
  readonly tag: number;

  constructor(s: Sodium, size: number) {
    const raw = (s as unknown as { libsodium?: RawSodium }).libsodium;
    if (
      raw?._crypto_secretstream_xchacha20poly1305_push.length !== 10 ||
      raw._crypto_secretstream_xchacha20poly1305_pull.length !== 10
    )
      throw new Error('this build of libsodium takes secretstream arguments knotless does not expect');
    this.raw = raw;
    this.in = raw._malloc(size);
    this.out = raw._malloc(size);
    this.tag = raw._malloc(1);
    if (this.in === 0 || this.out === 0 || this.tag === 0) {
      this.free();
      throw new Error('libsodium could not allocate its buffers');
    }
  }

  /** A Buffer over `len` bytes of libsodium's memory at `ptr` (made anew: its memory may grow). */
  view(ptr: number, len: number): Buffer {
    return Buffer.from(this.raw.HEAPU8.buffer, ptr, len);
  }

  free(): void {
    for (const p of [this.in, this.out, this.tag]) if (p !== 0) this.raw._free(p);
  }
}

/**
 * Encrypts a pack with libsodium's secretstream (XChaCha20-Poly1305, a final tag on the last
 * message, so a truncated stream is refused) into a new temporary file, read and written a chunk at
 * a time through the same few buffers. The caller closes both files.
 */
export async function encryptPack(pack: PackFile, key: Uint8Array, dir: string): Promise<PackFile> {
  const s = await sodium();
  const out = tempFile(dir, 'sealed');
  let io: Pieces | undefined;
  try {
    io = new Pieces(s, CHUNK + ABYTES);
    const pushed = s.crypto_secretstream_xchacha20poly1305_init_push(key);
    const state = address(pushed.state);
    const header = pushed.header;
    let at = 0;
    const write = (bytes: Uint8Array) => {
      fs.writeSync(out.fd, bytes, 0, bytes.length, at);
      at += bytes.length;
    };
    write(header);
    let off = 0;
    do {
      const n = pack.readInto(io.view(io.in, Math.min(CHUNK, pack.length - off)), off).length;
      off += n;
      const tag =
        off >= pack.length
          ? s.crypto_secretstream_xchacha20poly1305_TAG_FINAL
          : s.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE;
      // (state, c, clen_p, m, mlen low, mlen high, ad, adlen low, adlen high, tag)
      if (
        io.raw._crypto_secretstream_xchacha20poly1305_push(state, io.out, 0, io.in, n, 0, 0, 0, 0, tag) !== 0
      )
        throw new Error('libsodium refused to encrypt a piece of a pack');
      write(io.view(io.out, n + ABYTES));
    } while (off < pack.length);
    return PackFile.fromFds([{ fd: out.fd, size: at }], [out.path]);
  } catch (err) {
    fs.closeSync(out.fd);
    fs.rmSync(out.path, { force: true });
    throw err;
  } finally {
    io?.free();
  }
}

function damaged(id: string): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `Pack ${id} of the private repository does not decrypt (it was changed or cut short on the PDS); nothing was written.`,
  );
}

/**
 * Decrypts what {@link encryptPack} made into a new temporary file, a chunk at a time through the
 * same few buffers; any change, reordering or truncation is refused. The caller closes both files.
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
  let io: Pieces | undefined;
  try {
    io = new Pieces(s, CHUNK + ABYTES);
    const state = address(s.crypto_secretstream_xchacha20poly1305_init_pull(sealed.read(0, HEADER), key));
    let off = HEADER;
    let at = 0;
    let final = false;
    while (off < sealed.length) {
      if (final) throw damaged(id);
      const n = sealed.readInto(io.view(io.in, Math.min(CHUNK + ABYTES, sealed.length - off)), off).length;
      off += n;
      if (n < ABYTES) throw damaged(id);
      // (state, m, mlen_p, tag_p, c, clen low, clen high, ad, adlen low, adlen high)
      if (
        io.raw._crypto_secretstream_xchacha20poly1305_pull(state, io.out, 0, io.tag, io.in, n, 0, 0, 0, 0) !==
        0
      )
        throw damaged(id);
      final = io.raw.HEAPU8[io.tag] === s.crypto_secretstream_xchacha20poly1305_TAG_FINAL;
      fs.writeSync(out.fd, io.view(io.out, n - ABYTES), 0, n - ABYTES, at);
      at += n - ABYTES;
    }
    if (!final) throw damaged(id);
    return PackFile.fromFds([{ fd: out.fd, size: at }], [out.path]);
  } catch (err) {
    fs.closeSync(out.fd);
    fs.rmSync(out.path, { force: true });
    throw err;
  } finally {
    io?.free();
  }
}
