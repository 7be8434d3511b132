// The encryption of private repositories on its own: packs (libsodium's secretstream, file to file),
// a round trip over several messages and every way a PDS could change the bytes, refused; ref
// records (XChaCha20-Poly1305 from @noble/ciphers), byte for byte what libsodium makes.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PackFile } from '../src/git/pack-file.ts';
import { decryptPack, encryptPack, sealedPackSize } from '../src/private/pack-crypt.ts';
import { chacha, sodium } from '../src/private/libs.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'knotless-crypt-'));
const key = crypto.randomBytes(32);
const CHUNK = 256 * 1024;
const HEADER = 24;
const MESSAGE = CHUNK + 17;

async function sealed(plain: Buffer): Promise<Buffer> {
  const file = await encryptPack(PackFile.fromBytes(plain), key, dir);
  try {
    return file.bytes();
  } finally {
    file.close();
  }
}

async function opened(bytes: Buffer, k: Uint8Array = key): Promise<Buffer> {
  const file = await decryptPack(PackFile.fromBytes(bytes), k, dir, 'p'.repeat(40));
  try {
    return file.bytes();
  } finally {
    file.close();
  }
}

describe('pack encryption', () => {
  it('round-trips packs of every size around its message size, at the size it promises', async () => {
    for (const n of [32, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5]) {
      const plain = crypto.randomBytes(n);
      const bytes = await sealed(plain);
      assert.equal(bytes.length, sealedPackSize(n), `size of ${n}`);
      assert.equal(bytes.indexOf(plain.subarray(0, 16)), -1);
      assert.deepEqual(await opened(bytes), plain, `round trip of ${n}`);
    }
  });

  it('refuses a changed byte, a cut, a missing or reordered message, extra bytes and another key', async () => {
    const plain = crypto.randomBytes(3 * CHUNK + 5);
    const bytes = await sealed(plain);
    const flipped = Buffer.from(bytes);
    flipped[HEADER + MESSAGE + 7]! ^= 1;
    const at = (i: number) => bytes.subarray(HEADER + i * MESSAGE, HEADER + (i + 1) * MESSAGE);
    const cases: Record<string, Buffer> = {
      'a changed byte': flipped,
      'cut after the first messages': bytes.subarray(0, HEADER + 2 * MESSAGE),
      'the last bytes cut': bytes.subarray(0, bytes.length - 1),
      'a message missing': Buffer.concat([
        bytes.subarray(0, HEADER),
        at(0),
        at(2),
        bytes.subarray(HEADER + 3 * MESSAGE),
      ]),
      'two messages swapped': Buffer.concat([
        bytes.subarray(0, HEADER),
        at(1),
        at(0),
        bytes.subarray(HEADER + 2 * MESSAGE),
      ]),
      'bytes after the final message': Buffer.concat([bytes, Buffer.alloc(17)]),
      'only a header': bytes.subarray(0, HEADER),
    };
    for (const [what, bad] of Object.entries(cases))
      await assert.rejects(opened(bad), /does not decrypt/, what);
    await assert.rejects(opened(bytes, crypto.randomBytes(32)), /does not decrypt/, 'another key');
    // Nothing half-decrypted is left behind.
    assert.deepEqual(fs.readdirSync(dir), []);
  });
});

describe('pack encryption memory', () => {
  it('stays flat in the pack’s size: 128 MiB encrypted and decrypted within 16 MiB of the peak before', async () => {
    const file = path.join(dir, 'big-plain');
    const fd = fs.openSync(file, 'w+');
    const mib = crypto.randomBytes(1024 * 1024);
    for (let i = 0; i < 128; i++) fs.writeSync(fd, mib, 0, mib.length, i * mib.length);
    const before = process.resourceUsage().maxRSS;
    const pack = PackFile.fromFds([{ fd, size: 128 * mib.length }], [file]);
    const enc = await encryptPack(pack, key, dir);
    const dec = await decryptPack(enc, key, dir, 'p'.repeat(40));
    const grown = (process.resourceUsage().maxRSS - before) / 1024;
    assert.equal(dec.length, pack.length);
    for (const f of [pack, enc, dec]) f.close();
    assert.ok(grown < 16, `peak memory grew ${grown.toFixed(0)} MiB`);
  });
});

describe('pack encryption and libsodium-wrappers', () => {
  it('opens what the wrappers’ push makes, and the wrappers’ pull opens what it makes', async () => {
    const s = await sodium();
    const plain = crypto.randomBytes(2 * CHUNK + 9);
    const pieces = [plain.subarray(0, CHUNK), plain.subarray(CHUNK, 2 * CHUNK), plain.subarray(2 * CHUNK)];
    // Theirs, opened by ours.
    const { state, header } = s.crypto_secretstream_xchacha20poly1305_init_push(key);
    const theirs = Buffer.concat([
      header,
      ...pieces.map((p, i) =>
        s.crypto_secretstream_xchacha20poly1305_push(
          state,
          p,
          null,
          i === pieces.length - 1
            ? s.crypto_secretstream_xchacha20poly1305_TAG_FINAL
            : s.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE,
        ),
      ),
    ]);
    assert.deepEqual(await opened(theirs), plain);
    // Ours, opened by theirs.
    const ours = await sealed(plain);
    const pull = s.crypto_secretstream_xchacha20poly1305_init_pull(ours.subarray(0, HEADER), key);
    const got: Uint8Array[] = [];
    for (let off = HEADER; off < ours.length; off += MESSAGE) {
      const res = s.crypto_secretstream_xchacha20poly1305_pull(pull, ours.subarray(off, off + MESSAGE), null);
      assert.notEqual(res, false);
      if (res === false) return;
      got.push(res.message);
      assert.equal(
        res.tag,
        off + MESSAGE >= ours.length
          ? s.crypto_secretstream_xchacha20poly1305_TAG_FINAL
          : s.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE,
      );
    }
    assert.deepEqual(Buffer.concat(got), plain);
  });
});

describe('ref record encryption', () => {
  it('is libsodium’s XChaCha20-Poly1305: the same bytes either way, so records sealed by one open with the other', async () => {
    const { xchacha20poly1305 } = await chacha();
    const s = await sodium();
    for (const n of [0, 1, 63, 64, 65, 1000]) {
      const k = crypto.randomBytes(32);
      const nonce = crypto.randomBytes(24);
      const ad = crypto.randomBytes(n % 50);
      const plain = crypto.randomBytes(n);
      const ours = xchacha20poly1305(k, nonce, ad).encrypt(plain);
      const theirs = s.crypto_aead_xchacha20poly1305_ietf_encrypt(plain, ad, null, nonce, k);
      assert.deepEqual(Buffer.from(ours), Buffer.from(theirs), `${n} bytes`);
      assert.deepEqual(
        Buffer.from(s.crypto_aead_xchacha20poly1305_ietf_decrypt(null, ours, ad, nonce, k)),
        plain,
      );
      assert.deepEqual(Buffer.from(xchacha20poly1305(k, nonce, ad).decrypt(theirs)), plain);
      const changed = Buffer.from(theirs);
      changed[0]! ^= 1;
      assert.throws(() => xchacha20poly1305(k, nonce, ad).decrypt(changed));
    }
  });
});
