import { REF_COLLECTION, REPO_COLLECTION, XrpcClient, type Transport } from 'knotless-core';
import { REFS_COLLECTION, REFS_PART_COLLECTION } from 'knotless-core/records/collections';
import type { Index } from '../db/index-store.ts';
import type { LogFields } from '../log.ts';
import { applyWrite } from './apply.ts';
import { FORGE_COLLECTIONS, isForgeCollection } from 'knotless-core/forge/kinds/table';
import type { Identities } from './identities.ts';
import { readVerifiedRepo, type VerifiedRecord } from './verified-repo.ts';

/**
 * The accounts a PDS hosts, from com.atproto.sync.listRepos (every page): the active ones, and those
 * not active that `known` says the index holds (to be hidden, not read).
 */
export async function listPdsAccounts(
  pds: string,
  transport: Transport,
  known: (did: string) => Promise<boolean> = () => Promise.resolve(false),
): Promise<string[]> {
  const client = new XrpcClient(pds, { transport });
  const dids: string[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.query<{ repos: { did: string; active?: boolean }[]; cursor?: string }>(
      'com.atproto.sync.listRepos',
      { limit: 1000, cursor },
    );
    for (const r of page.repos) if (r.active !== false || (await known(r.did))) dids.push(r.did);
    cursor = page.repos.length > 0 ? page.cursor : undefined;
  } while (cursor !== undefined);
  return dids;
}

/**
 * Indexes every knotless record of one account from its PDS, at the revision of the account's signed
 * repository (verified-repo.ts: read whole and checked against the key of its DID document; one that
 * does not verify is refused, and nothing of it indexed): rows written since by the stream are newer
 * and stay; rows the repository lacks become tombstones. Returns the repositories whose mirrors
 * should catch up.
 */
export async function backfillAccount(
  did: string,
  index: Index,
  identities: Identities,
  transport: Transport,
  log: (line: string, fields?: LogFields) => void = () => {},
): Promise<string[]> {
  const before = await index.owner(did);
  const was = before?.status;
  const owner = await identities.owner(did, true);
  // What its PDS says of the account first (one getRepoStatus): an account that went away while no
  // stream told us (the appview was down, its position lost) is hidden, or removed, rather than read
  // or shown; one the index never held is left alone.
  const status = await identities.status(owner);
  if (status !== null && status !== undefined && was === undefined) return [];
  // Its PDS resolves no handle of an account it does not serve as active: the page saying what
  // became of it names it by the handle it last had (as the stream's account events do).
  if (typeof status === 'string' && owner.handle === null && before?.handle != null)
    await index.putOwner(did, before.handle, owner.pds);
  if (status === 'deleted') {
    if (was === 'deleted') return [];
    log(`${did} was deleted: its rows are removed from the index`);
    return index.accounts.purge(did);
  }
  if (typeof status === 'string') {
    if (was !== status) {
      await index.accounts.setStatus(did, status);
      log(`${did} is ${status}`);
    }
    return [];
  }
  const touched = new Set<string>();
  if (status === null && typeof was === 'string') {
    await index.accounts.setStatus(did, null);
    log(`${did} is active again`);
    // Its mirrors were left as they were: each catches up with what the listing below finds.
    for (const r of await index.repos({ did, limit: 1000 })) touched.add(r.name);
  }
  if (owner.pds === null) throw new Error(`${did} names no PDS`);
  const pds = owner.pds;
  const verified = await readVerifiedRepo({
    transport,
    pds,
    did,
    key: await identities.signingKey(did),
    freshKey: () => identities.signingKey(did, true),
    newest: await index.verified(did),
  });
  const { rev } = verified;
  const time = new Date().toISOString();
  const byCollection = new Map<string, VerifiedRecord[]>();
  for (const r of verified.records) {
    const list = byCollection.get(r.collection);
    if (list === undefined) byCollection.set(r.collection, [r]);
    else list.push(r);
  }
  const keys = async (collection: string): Promise<{ rkey: string; rev: string; deleted: number }[]> => {
    if (collection === REPO_COLLECTION)
      return (await index.allRepoNames(did)).map((r) => ({ rkey: r.name, rev: r.rev, deleted: r.deleted }));
    if (isForgeCollection(collection)) return index.forge.keys(collection, did);
    if (collection === REFS_COLLECTION) return index.allTableKeys(did, 'ref_tables');
    if (collection === REFS_PART_COLLECTION) return index.allTableKeys(did, 'ref_table_parts');
    return index.allRefKeys(did);
  };
  const apply = async (collection: string, rkey: string, cid: string | null, record: unknown) => {
    const repo = await applyWrite(index, { did, collection, rkey, rev, cid, record, time }, undefined, log);
    // A maintainer's table of another account's repository is caught up by that repository's next event.
    if (repo !== undefined && repo.did === did) touched.add(repo.repo);
  };
  const listed = new Map<string, Set<string>>();
  const list = async (collection: string): Promise<void> => {
    const seen = new Set<string>();
    listed.set(collection, seen);
    for (const r of byCollection.get(collection) ?? []) {
      seen.add(r.rkey);
      await apply(collection, r.rkey, r.cid, r.value);
    }
  };
  const forget = async (collection: string): Promise<void> => {
    const seen = listed.get(collection) ?? new Set<string>();
    for (const k of await keys(collection)) {
      if (seen.has(k.rkey) || k.deleted === 1 || k.rev >= rev) continue;
      await apply(collection, k.rkey, null, null);
    }
  };
  // A ref table's parts go in before the tables and out after them, as their writer orders them:
  // each table is then joined once, with its parts in place, and never with a part it lists gone.
  for (const collection of [REPO_COLLECTION, REF_COLLECTION]) {
    await list(collection);
    await forget(collection);
  }
  await list(REFS_PART_COLLECTION);
  await list(REFS_COLLECTION);
  await forget(REFS_COLLECTION);
  await forget(REFS_PART_COLLECTION);
  for (const collection of FORGE_COLLECTIONS) {
    await list(collection);
    await forget(collection);
  }
  await index.putVerified(did, { rev, key: verified.key, pds, at: time });
  return [...touched];
}
