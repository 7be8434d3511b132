import { BlobCache } from 'knotless-core/cache/blob-cache';
import { gitDir } from 'knotless-core/git/objects';
import { fetchPacks } from 'knotless-core/ops/fetch';
import type { RemoteRef } from 'knotless-core/records/remote-repo';
import type { HelperState } from './state.ts';

/**
 * Answers a batch of `fetch <oid> <name>` with the fetch operation (ops/fetch.ts), handed what this
 * helper knows: the remote, the refs git was shown and how to list them again.
 */
export async function fetchBatch(state: HelperState, lines: string[]): Promise<string[]> {
  const wants = lines.map((l) => l.split(' ')).map(([, oid, name]) => ({ oid: oid!, name: name! }));
  const remote = await state.remote();
  const { config } = state.ctx;
  return fetchPacks(
    {
      remote,
      gitDir: await gitDir(),
      cache: new BlobCache(config.cacheDir),
      refs: state.refs ?? new Map<string, RemoteRef>(),
      relist: () => state.list(false),
      maxObjectBytes: config.maxObjectBytes,
      chatter: state.options,
    },
    wants,
  );
}
