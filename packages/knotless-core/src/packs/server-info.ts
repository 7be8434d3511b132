import path from 'node:path';
import { readJson, writeFileAtomic } from '../fsutil.ts';
import { isKnotlessError } from '../errors.ts';
import { XrpcError, type XrpcClient } from '../xrpc/client.ts';

/** Blob size assumed when a PDS does not say (the reference PDS's default). */
export const DEFAULT_BLOB_LIMIT = 5 * 1024 * 1024;
const TTL_MS = 24 * 3600 * 1000;

/**
 * The largest blob a PDS accepts, from describeServer, cached a day per PDS so that only the first
 * large push to it spends the request.
 */
export async function blobUploadLimit(client: XrpcClient, cacheDir: string): Promise<number> {
  const file = path.join(cacheDir, 'servers.json');
  const all = readJson<Record<string, { blobUploadLimit: number; at: number }>>(file) ?? {};
  const hit = all[client.service];
  if (hit !== undefined && Date.now() - hit.at < TTL_MS) return hit.blobUploadLimit;
  let limit = DEFAULT_BLOB_LIMIT;
  try {
    const res = await client.query<{ blobUploadLimit?: unknown }>('com.atproto.server.describeServer');
    if (typeof res.blobUploadLimit === 'number' && res.blobUploadLimit > 0) limit = res.blobUploadLimit;
  } catch (err) {
    // A PDS that will not describe itself (a refusal, or no answer) gets the conservative default;
    // anything else is a bug, and surfaces.
    if (!(err instanceof XrpcError) && !isKnotlessError(err)) throw err;
  }
  all[client.service] = { blobUploadLimit: limit, at: Date.now() };
  writeFileAtomic(file, JSON.stringify(all));
  return limit;
}
