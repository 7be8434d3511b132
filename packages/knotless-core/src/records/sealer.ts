import type { PackFile } from '../git/pack-file.ts';
import type { PackEntry, RefRecord } from './ref-record.ts';

/**
 * What a private repository's records and packs are sealed and opened with (private/sealer.ts
 * implements it). A public repository has none, and its records are written as they are.
 */
export interface RefSealer {
  /** The key epoch what is sealed now is sealed under. */
  readonly epoch: number;
  /** The record key of a ref: names nothing. */
  refKey(ref: string): string;
  /** The record to write for `record` under `key`. */
  seal(key: string, record: RefRecord): Record<string, unknown>;
  /** The ref a sealed record holds; a record changed on the way, or under another key, is refused. */
  open(key: string, value: Record<string, unknown>): RefRecord;
  /** `pack` encrypted into a new temporary file under `dir`, and the key epoch it was encrypted for. */
  sealPack(pack: PackFile, dir: string): Promise<{ file: PackFile; epoch: number }>;
  /**
   * What {@link sealPack} made under `epoch`'s key, opened into a new temporary file under `dir`
   * (`id` names it in the refusal when it does not decrypt); the caller closes both files.
   */
  openPack(sealed: PackFile, epoch: number, dir: string, id: string): Promise<PackFile>;
  /** True when the sealer holds `epoch`'s key. */
  knows(epoch: number): boolean;
  /**
   * A ref table's record, or a part of one (`collection`), in the account `account` under `key`,
   * sealed whole: its JSON encrypted under the current epoch, the blobs its packs name referenced.
   */
  sealTable(
    account: string,
    collection: string,
    key: string,
    value: Record<string, unknown>,
  ): Record<string, unknown>;
  /** The JSON {@link sealTable} sealed; refused when it was changed on the way or moved. */
  openTable(account: string, collection: string, key: string, value: Record<string, unknown>): unknown;
  /** Gives the sealed packs an opened table lists the key that opens them. */
  attachPacks(packs: PackEntry[]): void;
  /** A table part's key digest, keyed with the repository's key: a sealed part's key names nothing. */
  partDigest(json: string): string;
}

/**
 * Finds out whether a repository is private and, when it is, opens it with this machine's keys.
 * `seen` is what a listing showed: sealed records, plain ones, or nothing (an empty repository, or no
 * listing yet). Answers undefined for a public repository; throws when the repository is private and
 * this machine holds no key that opens it.
 */
export type PrivacyOpener = (
  seen: 'sealed' | 'plain' | 'none',
  /** The newest key epoch a listed record names (a ring that lacks it is read again). */
  epoch?: number,
) => Promise<RefSealer | undefined>;

/** The newest key epoch sealed records name. */
export function newestEpoch(values: unknown[]): number {
  let n = 0;
  for (const v of values) {
    const e = isSealed(v) ? v['epoch'] : undefined;
    if (typeof e === 'number' && Number.isSafeInteger(e) && e > n) n = e;
  }
  return n;
}

/** True when a record read from a PDS is a sealed (private) one. */
export function isSealed(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && 'sealed' in value;
}
