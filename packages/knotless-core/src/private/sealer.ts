import crypto from 'node:crypto';
import { KnotlessError } from '../errors.ts';
import type { PackFile } from '../git/pack-file.ts';
import { refKeyPrefix, REF_COLLECTION } from '../records/collections.ts';
import {
  parseRefRecord,
  writeRefRecord,
  type BlobRef,
  type PackEntry,
  type RefRecord,
} from '../records/ref-record.ts';
import type { RefSealer } from '../records/sealer.ts';
import { decryptPack, encryptPack } from './pack-crypt.ts';
import { chacha, preloadSodium } from './libs.ts';

type Chacha = Awaited<ReturnType<typeof chacha>>;

/** XChaCha20-Poly1305's nonce: 24 random bytes, safe to draw at random for any number of records. */
const NONCE = 24;

/** A repository's keys: one random 32-byte key per epoch, the last the current one. */
export interface KeyRing {
  epochs: Uint8Array[];
}

/** A key for one use, derived from an epoch's key with HKDF (node:crypto), so no key serves two. */
export function derive(key: Uint8Array, use: string): Buffer {
  return Buffer.from(crypto.hkdfSync('sha256', key, Buffer.alloc(0), `knotless ${use}`, 32));
}

function corrupt(what: string, record = 'A ref record'): KnotlessError {
  return new KnotlessError(
    'corrupt-remote',
    `${record} of the private repository ${what} (it was changed on the PDS, or written for another repository); nothing was read from it.`,
  );
}

/** The blobs a table's (or a part's) pack table names: what its sealed record must reference. */
function tableBlobs(value: Record<string, unknown>): BlobRef[] {
  const packs = Array.isArray(value['packs']) ? (value['packs'] as unknown[]) : [];
  return packs.flatMap((p) => {
    const parts = (p as { parts?: unknown } | null)?.parts;
    return Array.isArray(parts) ? (parts as BlobRef[]) : [];
  });
}

/** The CIDs a record's `blobs` field references. */
function listedBlobs(value: Record<string, unknown>): Set<unknown> {
  return new Set(
    (Array.isArray(value['blobs']) ? value['blobs'] : []).map(
      (b) => (b as { ref?: { $link?: unknown } } | null)?.ref?.$link,
    ),
  );
}

/**
 * Seals and opens one private repository's ref records and packs (see docs/reference/private.md):
 *
 * - record keys are `<repo>~~` and an HMAC-SHA256 of the ref name under a key derived from the first
 *   epoch's key, so they stay the same across rotations (compare-and-swap per ref goes on working)
 *   and say nothing of the name;
 * - a record's contents (ref name, target, pack list, inline packs) are one XChaCha20-Poly1305
 *   message (libsodium's `crypto_aead_xchacha20poly1305_ietf`, here from `@noble/ciphers`: see
 *   libs.ts) under the current epoch's record key, a random nonce before it, its associated data the account, the repository
 *   and the record key, so a record cannot be moved to another key or repository;
 * - a pack's blobs are the pack encrypted with secretstream under its epoch's pack key.
 *
 * Only the blob references stay in the clear: a PDS keeps the blobs its records reference.
 */
export class RepoSealer implements RefSealer {
  readonly #c: Chacha;
  readonly #did: string;
  readonly #repo: string;
  readonly #ring: KeyRing;
  readonly #names: Buffer;

  private constructor(c: Chacha, did: string, repo: string, ring: KeyRing) {
    this.#c = c;
    this.#did = did;
    this.#repo = repo;
    this.#ring = ring;
    this.#names = derive(ring.epochs[0]!, 'ref names');
  }

  static async create(did: string, repo: string, ring: KeyRing): Promise<RepoSealer> {
    if (ring.epochs.length === 0) throw new Error('a key ring without keys');
    return new RepoSealer(await chacha(), did, repo, ring);
  }

  get epoch(): number {
    return this.#ring.epochs.length - 1;
  }

  /** True when the ring holds `epoch`'s key. */
  knows(epoch: number): boolean {
    return Number.isSafeInteger(epoch) && epoch >= 0 && epoch < this.#ring.epochs.length;
  }

  refKey(ref: string): string {
    const mac = crypto.createHmac('sha256', this.#names).update(ref, 'utf8').digest('hex').slice(0, 32);
    return `${refKeyPrefix(this.#repo)}~${mac}`;
  }

  #ad(key: string): Buffer {
    return Buffer.from(`${REF_COLLECTION}\n${this.#did}\n${this.#repo}\n${key}`, 'utf8');
  }

  /**
   * A table's associated data: the collection, the repository (its owner and name), the account the
   * record is in (the owner's, or a maintainer's) and its key, so a sealed table or part opens only
   * where it was written: not as another repository's, another writer's, or another part.
   */
  #tableAd(account: string, collection: string, key: string): Buffer {
    return Buffer.from(`${collection}\n${this.#did}\n${this.#repo}\n${account}\n${key}`, 'utf8');
  }

  sealTable(
    account: string,
    collection: string,
    key: string,
    value: Record<string, unknown>,
  ): Record<string, unknown> {
    return {
      $type: collection,
      repo: value['repo'],
      ...this.#box('ref tables', this.#tableAd(account, collection, key), value),
      blobs: tableBlobs(value),
    };
  }

  openTable(account: string, collection: string, key: string, value: Record<string, unknown>): unknown {
    const what = 'A ref table';
    const opened = this.#unbox('ref tables', this.#tableAd(account, collection, key), value, what);
    let plain: unknown;
    try {
      plain = JSON.parse(Buffer.from(opened).toString('utf8'));
    } catch {
      throw corrupt('does not decrypt', what);
    }
    if (typeof plain !== 'object' || plain === null || Array.isArray(plain))
      throw corrupt('does not hold a table', what);
    const listed = listedBlobs(value);
    if (tableBlobs(plain as Record<string, unknown>).some((b) => !listed.has(b?.ref?.$link)))
      throw corrupt('lists blobs it does not reference', what);
    return { $type: collection, ...plain };
  }

  attachPacks(packs: PackEntry[]): void {
    for (const p of packs)
      if (p.sealed !== undefined && p.decrypt === undefined) this.#attach(p, p.sealed.epoch);
  }

  partDigest(json: string): string {
    return crypto.createHmac('sha256', this.#names).update(json, 'utf8').digest('hex').slice(0, 32);
  }

  /**
   * `value`'s JSON (its `$type` left out) sealed under the current epoch's key for `use`, bound to
   * `ad`: the `epoch` and `sealed` fields of a sealed record.
   */
  #box(
    use: string,
    ad: Buffer,
    value: Record<string, unknown>,
  ): { epoch: number; sealed: { $bytes: string } } {
    const { $type: _type, ...plain } = value;
    const nonce = crypto.randomBytes(NONCE);
    const box = this.#c
      .xchacha20poly1305(derive(this.#ring.epochs[this.epoch]!, use), nonce, ad)
      .encrypt(Buffer.from(JSON.stringify(plain), 'utf8'));
    return { epoch: this.epoch, sealed: { $bytes: Buffer.concat([nonce, box]).toString('base64') } };
  }

  /** What {@link #box} sealed in `value`, its plaintext; `record` names it in the refusal. */
  #unbox(use: string, ad: Buffer, value: Record<string, unknown>, record: string): Uint8Array {
    const epoch = value['epoch'];
    const sealed = (value['sealed'] as { $bytes?: unknown } | undefined)?.$bytes;
    if (typeof epoch !== 'number' || !this.knows(epoch))
      throw corrupt('names a key epoch this ring lacks', record);
    if (typeof sealed !== 'string') throw corrupt('holds no sealed contents', record);
    const bytes = Buffer.from(sealed, 'base64');
    if (bytes.length < NONCE) throw corrupt('does not decrypt', record);
    try {
      return this.#c
        .xchacha20poly1305(derive(this.#ring.epochs[epoch]!, use), bytes.subarray(0, NONCE), ad)
        .decrypt(bytes.subarray(NONCE));
    } catch {
      throw corrupt('does not decrypt', record);
    }
  }

  seal(key: string, record: RefRecord): Record<string, unknown> {
    const blobs: BlobRef[] = record.packs.flatMap((p) => p.parts ?? []);
    return {
      $type: REF_COLLECTION,
      repo: this.#repo,
      ...this.#box('ref records', this.#ad(key), writeRefRecord(record)),
      blobs,
    };
  }

  open(key: string, value: Record<string, unknown>): RefRecord {
    const plain = this.#unbox('ref records', this.#ad(key), value, 'A ref record');
    let record: RefRecord;
    try {
      record = parseRefRecord(JSON.parse(Buffer.from(plain).toString('utf8')));
    } catch {
      throw corrupt('does not hold a valid ref');
    }
    if (record.repo !== this.#repo || this.refKey(record.ref) !== key) throw corrupt('is under another key');
    const listed = listedBlobs(value);
    for (const p of record.packs) {
      if (p.parts?.some((part) => !listed.has(part.ref.$link)))
        throw corrupt('lists blobs it does not reference');
      if (p.sealed !== undefined) this.#attach(p, p.sealed.epoch);
    }
    return record;
  }

  #attach(pack: PackEntry, epoch: number): void {
    if (!this.knows(epoch)) throw corrupt('names a key epoch this ring lacks');
    const key = derive(this.#ring.epochs[epoch]!, 'packs');
    pack.decrypt = (file, dir) => decryptPack(file, key, dir, pack.id);
    pack.decryptSoon = preloadSodium;
  }

  async openPack(sealed: PackFile, epoch: number, dir: string, id: string): Promise<PackFile> {
    if (!this.knows(epoch)) throw corrupt('names a key epoch this ring lacks');
    return decryptPack(sealed, derive(this.#ring.epochs[epoch]!, 'packs'), dir, id);
  }

  async sealPack(pack: PackFile, dir: string): Promise<{ file: PackFile; epoch: number }> {
    const epoch = this.epoch;
    return { file: await encryptPack(pack, derive(this.#ring.epochs[epoch]!, 'packs'), dir), epoch };
  }
}
