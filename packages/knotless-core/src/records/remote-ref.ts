// A ref record as read from the PDS, checked (and opened, in a private repository) before anything
// uses it, and the refs of a listing by name, those several records claim set apart.
import { KnotlessError, isKnotlessError } from '../errors.ts';
import { safeText } from '../text/terminal.ts';
import { MAX_RECORD_BYTES, parseRefRecord, type RefRecord } from './ref-record.ts';
import { isSealed, type RefSealer } from './sealer.ts';

/** A ref record as read: its key, its CID (for compare-and-swap) and its contents. */
export interface RemoteRef {
  key: string;
  cid: string;
  record: RefRecord;
  /** The account revision that wrote it, when known (writes and the event stream say). */
  rev?: string;
}

/**
 * A listed or read ref record as a {@link RemoteRef}, or undefined (warned of) when it is invalid:
 * oversized, without a CID, sealed in a public repository or plain in a private one, or naming
 * another repository. A sealed record that does not open fails the whole read: a hostile PDS must
 * not choose our refs by breaking some of them.
 */
export function parseRemoteRef(
  repo: { name: string; sealer: RefSealer | undefined; warn: (message: string) => void },
  key: string,
  cid: string,
  value: unknown,
): RemoteRef | undefined {
  try {
    // Measured before parsing, so that an oversized record costs no more than its download.
    const size = JSON.stringify(value)?.length ?? 0;
    if (size > MAX_RECORD_BYTES)
      throw new KnotlessError(
        'corrupt-remote',
        `The remote holds a ref record of ${size} bytes, over the limit of ${MAX_RECORD_BYTES}; it was ignored.`,
      );
    // Without its CID a record cannot be compare-and-swapped: never write on a guess.
    if (typeof cid !== 'string' || cid === '')
      throw new KnotlessError(
        'corrupt-remote',
        'The remote holds a ref record listed without its CID; it was ignored.',
      );
    const sealer = repo.sealer;
    if (sealer === undefined && isSealed(value))
      throw new KnotlessError(
        'corrupt-remote',
        'The remote holds a sealed ref record in a repository that is not private; it was ignored.',
      );
    if (sealer !== undefined && !isSealed(value))
      throw new KnotlessError(
        'corrupt-remote',
        'The remote holds a plain ref record in a private repository; it was ignored.',
      );
    // A sealed record that does not open is refused outright, not skipped: see #open.
    const record =
      sealer !== undefined && isSealed(value) ? opened(sealer, key, value) : parseRefRecord(value);
    // A record under this repository's keys that claims another repository is not one of its refs.
    if (record.repo !== repo.name)
      throw new KnotlessError(
        'corrupt-remote',
        `The remote holds an invalid ref record (it names repository "${safeText(record.repo, 100)}"); it was ignored.`,
      );
    return { key, cid, record };
  } catch (err) {
    if (!isKnotlessError(err) || err instanceof SealBroken) throw err;
    repo.warn(`${err.message.replace(/\.$/, '')} (record ${safeText(key, 100)})`);
    return undefined;
  }
}

/** A sealed record that did not open: the whole read fails (a hostile PDS must not pick our refs). */
class SealBroken extends KnotlessError {}

function opened(sealer: RefSealer, key: string, value: Record<string, unknown>): RefRecord {
  try {
    return sealer.open(key, value);
  } catch (err) {
    if (!isKnotlessError(err)) throw err;
    throw new SealBroken(err.code, err.message, { cause: err });
  }
}

/** Refs by name, and apart those that two or more records claim (no record of such a ref is used). */
export function refsByName(refs: RemoteRef[]): {
  byName: Map<string, RemoteRef>;
  contested: Map<string, RemoteRef[]>;
} {
  const claims = new Map<string, RemoteRef[]>();
  for (const r of refs) claims.set(r.record.ref, [...(claims.get(r.record.ref) ?? []), r]);
  const byName = new Map<string, RemoteRef>();
  const contested = new Map<string, RemoteRef[]>();
  for (const [name, list] of claims) {
    if (list.length === 1) byName.set(name, list[0]!);
    else contested.set(name, list);
  }
  return { byName, contested };
}

/** The one sentence for a ref that several records claim. */
export function contestedSentence(ref: string, claims: RemoteRef[]): string {
  const keys = claims.map((c) => safeText(c.key, 100)).join(', ');
  return `The remote holds ${claims.length} records for the ref ${safeText(ref)} (${keys}); knotless will not choose one, so the ref was ignored: delete it (git push <remote> :${safeText(ref)}) and push it again`;
}
