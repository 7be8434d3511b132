// What writing ref records can meet: the refusals a caller acts on (a moved record, a refused key, a
// freed blob), each as its own error class, and how a record read back is known to be ours.
import { KnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import { XrpcError, generalFailure } from '../xrpc/client.ts';
import { pdsRefusal } from '../xrpc/pds-errors.ts';
import type { RefRecord } from './ref-record.ts';

/** Thrown when a compare-and-swap write found the record changed. */
export class SwapConflict extends Error {
  override name = 'SwapConflict';
}

/** Thrown when the PDS refuses a record key (it filters some words out of keys). */
export class KeyRefused extends Error {
  override name = 'KeyRefused';
}

/**
 * Thrown when the PDS refused a write because a blob its record lists is not stored (a compaction or
 * a rewind elsewhere freed it since the record that listed it was read).
 */
export class BlobMissing extends Error {
  override name = 'BlobMissing';
}

/** One write of an atomic batch. */
export type RefWrite =
  { action: 'create' | 'update'; key: string; record: RefRecord } | { action: 'delete'; key: string };

/** True when a record read back is the one we wrote (its `updatedAt` makes it ours, not a twin). */
export function sameRecord(a: RefRecord, b: RefRecord): boolean {
  return (
    a.ref === b.ref &&
    a.target === b.target &&
    a.symref === b.symref &&
    a.peeled === b.peeled &&
    a.updatedAt === b.updatedAt &&
    a.packs.length === b.packs.length &&
    a.packs.every((p, i) => p.id === b.packs[i]?.id)
  );
}

/**
 * A write's failure as the user should read it. `what` names no single ref, so that a push whose
 * refs all fail for one reason prints one sentence (git's own lines say which refs failed).
 */
export function writeFailure(err: unknown, what: string, ref?: string): unknown {
  if (!(err instanceof XrpcError)) return err;
  switch (pdsRefusal(err)) {
    case 'swap-conflict':
      return new SwapConflict(err.message);
    case 'key-refused':
      return new KeyRefused(err.message);
    case 'blob-missing':
      return new BlobMissing(err.message);
    case 'too-large':
      return new KnotlessError(
        'too-large',
        `The PDS refused ${safeText(ref ?? what)} as too large (${safeText(err.message)}).`,
        { cause: err },
      );
    default:
      return generalFailure(err, what);
  }
}
