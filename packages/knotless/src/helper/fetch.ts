import { BlobCache } from 'knotless-core/cache/blob-cache';
import { gitDir } from 'knotless-core/git/objects';
import { fetchPacks } from 'knotless-core/ops/fetch';
import { ensureLfsSettings } from 'knotless-core/ops/lfs';
import { BIN_SCRIPTS } from '../paths.ts';
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
  const dir = await gitDir();
  // git-lfs's checkout after a clone's fetch needs knotless as its transfer agent to find LFS objects.
  await ensureLfsSettings(BIN_SCRIPTS['knotless']!, dir);
  return fetchPacks(
    {
      remote,
      gitDir: dir,
      cache: new BlobCache(config.cacheDir),
      refs: state.refs ?? new Map<string, RemoteRef>(),
      relist: () => state.list(false),
      maxObjectBytes: config.maxObjectBytes,
      chatter: state.options,
    },
    wants,
  );
}
