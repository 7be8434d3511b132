import { REPO_COLLECTION, XrpcClient, XrpcError, type Transport } from 'knotless-core';
import { FORGE_COLLECTIONS } from 'knotless-core/forge/kinds/table';
import type { Identities } from './identities.ts';

/**
 * The collections that make an account worth indexing: its repositories, and the forge's records
 * (someone who only opened an issue has no repository). Ref records never come without a repository
 * record in the same account, so that collection is not asked about.
 */
export const DISCOVERY_COLLECTIONS = [REPO_COLLECTION, ...FORGE_COLLECTIONS];

/** Answers that mean the relay has no listReposByCollection (so the slow way is taken). */
function isMissingMethod(err: unknown): boolean {
  return (
    err instanceof XrpcError &&
    (err.status === 404 ||
      err.status === 501 ||
      err.error === 'MethodNotImplemented' ||
      err.error === 'XRPCNotSupported')
  );
}

/** Every page of a relay listing, its rows' DIDs. */
async function* pages(
  client: XrpcClient,
  nsid: string,
  params: Record<string, string>,
): AsyncGenerator<{ did: string; active?: boolean }[]> {
  let cursor: string | undefined;
  do {
    const page = await client.query<{ repos?: unknown; cursor?: unknown }>(nsid, {
      ...params,
      limit: 1000,
      ...(cursor === undefined ? {} : { cursor }),
    });
    const repos = Array.isArray(page.repos) ? (page.repos as { did?: unknown; active?: unknown }[]) : [];
    yield repos
      .filter((r) => typeof r?.did === 'string' && r.did.startsWith('did:'))
      .map((r) => ({ did: r.did as string, ...(r.active === false ? { active: false } : {}) }));
    // A cursor that does not move would loop for ever: a page that repeats ends the listing.
    const next = typeof page.cursor === 'string' && repos.length > 0 ? page.cursor : undefined;
    cursor = next === cursor ? undefined : next;
  } while (cursor !== undefined);
}

/**
 * The accounts a relay knows to hold knotless records: com.atproto.sync.listReposByCollection for
 * each collection, or, from a relay without that method, every account of com.atproto.sync.listRepos
 * whose PDS lists a knotless collection in com.atproto.repo.describeRepo (slow: one DID resolution
 * and one request per account of the network; `concurrency` at a time).
 */
export async function discoverAccounts(
  relay: string,
  transport: Transport,
  identities: Identities,
  log: (line: string) => void,
  concurrency = 8,
): Promise<Set<string>> {
  const client = new XrpcClient(relay, { transport });
  const found = new Set<string>();
  try {
    for (const collection of DISCOVERY_COLLECTIONS)
      for await (const rows of pages(client, 'com.atproto.sync.listReposByCollection', { collection }))
        for (const r of rows) found.add(r.did);
    return found;
  } catch (err) {
    if (!isMissingMethod(err)) throw err;
    log(`${relay} has no listReposByCollection: asking every account's PDS (describeRepo)`);
  }
  const wanted = new Set<string>(DISCOVERY_COLLECTIONS);
  for await (const rows of pages(client, 'com.atproto.sync.listRepos', {})) {
    const active = rows.filter((r) => r.active !== false).map((r) => r.did);
    await eachLimited(active, concurrency, async (did) => {
      try {
        const pds = await identities.pdsOf(did);
        if (pds === null) return;
        const d = await new XrpcClient(pds, { transport }).query<{ collections?: unknown }>(
          'com.atproto.repo.describeRepo',
          { repo: did },
        );
        const cols = Array.isArray(d.collections) ? d.collections : [];
        if (cols.some((c) => typeof c === 'string' && wanted.has(c))) found.add(did);
      } catch (err) {
        log(`describing ${did}: ${String(err)}`);
      }
    });
  }
  return found;
}

/** Runs `work` on every item, at most `limit` at a time; each item's failure is its own to handle. */
export async function eachLimited<T>(
  items: Iterable<T>,
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  const it = items[Symbol.iterator]();
  const worker = async (): Promise<void> => {
    for (let n = it.next(); n.done !== true; n = it.next()) await work(n.value);
  };
  await Promise.all(Array.from({ length: Math.max(1, limit) }, worker));
}
