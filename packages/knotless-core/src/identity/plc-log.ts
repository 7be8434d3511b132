// An account's signing key before its current one, read from the PLC directory's audit log. After
// an account moves, its new PDS serves the commit the old PDS signed (the reference PDS imports the
// repository as it is and re-signs only at the account's next write), so a proof read then is
// signed by the key the account had before. Such a proof is genuine only if it was signed before
// that key was replaced: the log says when, and a commit's revision (a TID) says when it was made.
import type { Transport } from '../xrpc/transport.ts';

/** The key the account's current `#atproto` key replaced, and when the PLC directory replaced it. */
export interface PreviousKey {
  /** A `did:key`. */
  key: string;
  /** When the operation that replaced it was accepted (ISO 8601, the log's `createdAt`). */
  replacedAt: string;
}

const LOG_MAX_BYTES = 1024 * 1024;

/**
 * The `#atproto` key of `did` before `current` in the PLC directory's audit log (operations that were
 * nullified left out), with when it was replaced; undefined when the log names no earlier key. A log
 * that cannot be read or is not the directory's shape throws.
 */
export async function previousSigningKey(
  transport: Transport,
  plcUrl: string,
  did: string,
  current: string,
  signal: AbortSignal,
): Promise<PreviousKey | undefined> {
  const url = new URL(`/${encodeURIComponent(did)}/log/audit`, plcUrl);
  const res = await transport.request(url, {
    method: 'GET',
    headers: { accept: 'application/json' },
    body: null,
    maxBytes: LOG_MAX_BYTES,
    signal,
  });
  if (res.status < 200 || res.status > 299)
    throw new Error(`the PLC directory answered HTTP ${res.status} for the audit log`);
  const log = JSON.parse(res.body.toString('utf8')) as unknown;
  if (!Array.isArray(log)) throw new Error("the PLC directory's audit log is not a list");
  const ops: Array<{ key: string | undefined; at: string }> = [];
  for (const entry of log as unknown[]) {
    const e = entry as { nullified?: unknown; createdAt?: unknown; operation?: unknown } | null;
    if (e === null || typeof e !== 'object' || typeof e.createdAt !== 'string')
      throw new Error("an entry of the PLC directory's audit log is not of its shape");
    if (e.nullified === true) continue;
    const op = e.operation as { verificationMethods?: { atproto?: unknown }; signingKey?: unknown } | null;
    // A current operation names the key among its verification methods; the first, older form of
    // operation (`create`) names it as its signing key; a tombstone names none.
    const key = op?.verificationMethods?.atproto ?? op?.signingKey;
    ops.push({ key: typeof key === 'string' ? key : undefined, at: e.createdAt });
  }
  let i = ops.length - 1;
  while (i >= 0 && ops[i]!.key === current) i--;
  if (i < 0 || i === ops.length - 1) return undefined;
  const key = ops[i]!.key;
  return key === undefined ? undefined : { key, replacedAt: ops[i + 1]!.at };
}
